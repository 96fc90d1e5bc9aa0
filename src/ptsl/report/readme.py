"""Embed the generated results (reports/results.md) into README.md between markers, so the
README shows exactly what the last pipeline run produced. ``make repro`` runs it after
``dvc repro``; a test fails when the README is out of date."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..core.files import write_atomic

START, END = "<!-- results:start -->", "<!-- results:end -->"


def render(results_md: str, reports_prefix: str = "reports/") -> str:
    """The README block: results.md with its relative links pointing into ``reports/``."""
    body = re.sub(r"\]\((?!https?:)([^)]+)\)", lambda m: f"]({reports_prefix}{m.group(1)})",
                  results_md.strip())
    return f"{START}\n{body}\n{END}"


def embedded(readme: str) -> str:
    """The current block in the README (markers included)."""
    i, j = readme.find(START), readme.find(END)
    if i < 0 or j < i:
        raise ValueError(f"README.md has no {START} ... {END} block")
    return readme[i:j + len(END)]


def update(readme_path: Path = Path("README.md"),
           results_path: Path = Path("reports/results.md")) -> bool:
    """Rewrite the README block; returns whether anything changed."""
    if not results_path.is_file():
        raise FileNotFoundError(f"{results_path} is missing; run `dvc repro` first")
    readme = readme_path.read_text()
    new = readme.replace(embedded(readme), render(results_path.read_text()))
    if new != readme:
        write_atomic(readme_path, new, "README")
    return new != readme


if __name__ == "__main__":
    changed = update()
    print("README.md results updated" if changed else "README.md results already current")
    sys.exit(0)
