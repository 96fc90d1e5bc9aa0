"""Embed the summary of the generated results (the top of reports/results.md: the headline table
of each benchmark, one line of protocol, one line of metric) into README.md between markers, with
a link to every table, so the README shows exactly what the last pipeline run produced.
``make repro`` runs it after ``dvc repro``; a test fails when the README is out of date."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..core.files import write_atomic
from .markdown import SUMMARY_END, SUMMARY_START

START, END = "<!-- results:start -->", "<!-- results:end -->"


def render(results_md: str, reports_prefix: str = "reports/") -> str:
    """The README block: results.md's summary with its relative links pointing into
    ``reports/``, and a link to every table."""
    i, j = results_md.find(SUMMARY_START), results_md.find(SUMMARY_END)
    if i < 0 or j < i:
        raise ValueError(f"results.md has no {SUMMARY_START} ... {SUMMARY_END} block; run "
                         "`dvc repro` to rebuild it")
    summary = results_md[i + len(SUMMARY_START):j].strip()
    body = re.sub(r"\]\((?!https?:)([^)]+)\)", lambda m: f"]({reports_prefix}{m.group(1)})",
                  summary)
    full = f"{reports_prefix}results.md"
    return (f"{START}\n{body}\n\nEvery table with its notes, figures and the sources of the "
            f"published values: [{full}]({full}).\n{END}")


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
