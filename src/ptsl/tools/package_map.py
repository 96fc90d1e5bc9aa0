"""The package map of docs/reproducibility.md, made from the code: one row per folder of
``src/ptsl``, with the first phrase of its ``__init__`` docstring and every module in it.

``python -m ptsl.tools.package_map`` prints it; ``--write`` puts it into the page between its
markers. tests/unit/test_package_map.py fails while the page's copy differs from the code's.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import ptsl

PACKAGE = Path(ptsl.__file__).parent
PAGE = Path("docs/reproducibility.md")
START = "<!-- package map: python -m ptsl.tools.package_map --write -->"
END = "<!-- package map end -->"


def _phrase(init: Path) -> str:
    """The docstring's opening phrase: its first line up to a colon, semicolon or full stop."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    return re.split(r"[:;]\s|\.\s|\.$", first, maxsplit=1)[0].replace("``", "`").strip()


def folders(package: Path = PACKAGE) -> list[tuple[str, str, list[str]]]:
    """(folder relative to the package's parent, phrase, modules) for every folder that holds
    Python modules, in path order; a module is named without ``.py``, ``__init__`` left out."""
    out = []
    for init in sorted(package.rglob("__init__.py")):
        folder = init.parent
        modules = sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")
        if modules:
            out.append((f"{folder.relative_to(package.parent).as_posix()}/", _phrase(init),
                        modules))
    return out


def package_map(package: Path = PACKAGE) -> str:
    """The map as a markdown table."""
    lines = ["| folder | what it holds | modules |", "|---|---|---|"]
    for folder, phrase, modules in folders(package):
        lines.append(f"| `src/{folder}` | {phrase} | {', '.join(f'`{m}`' for m in modules)} |")
    return "\n".join(lines) + "\n"


def page_copy(text: str) -> str | None:
    """What stands between the markers of ``text``, or None without them."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write(page: Path, package: Path = PACKAGE) -> bool:
    """Put the map of ``package`` into ``page``; returns whether it changed."""
    text = page.read_text()
    if page_copy(text) is None:
        raise SystemExit(f"error: {page}: no package map markers ({START} ... {END})")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    new = f"{head}{START}\n{package_map(package)}{END}{tail}"
    if new != text:
        page.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptsl.tools.package_map", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true",
                    help=f"put the map into {PAGE} (run from the project root)")
    args = ap.parse_args(argv)
    if args.write:
        print(f"{PAGE}: {'updated' if write(PAGE) else 'already current'}")
    else:
        sys.stdout.write(package_map())
    return 0


if __name__ == "__main__":
    sys.exit(main())
