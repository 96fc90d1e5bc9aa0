"""Every citation of the reference notes leads somewhere: each "reference 4.4" or "reference Q7"
in src/, pipeline/, tests/, docs/ and the README (and the older phrasings "reference doc 4.4",
"(doc 1.3)", "doc 5.2-5.4", "quirk Q8", "reference doc section 1.1", "§5.5") names a heading of
docs/reference.md that starts with that number, and exactly one."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ..conftest import ROOT

REFERENCE = ROOT / "docs" / "reference.md"
SCANNED = ("src", "pipeline", "tests", "docs", "README.md")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh"}

ITEM = r"(?:Q\d+|\d+(?:\.\d+)*)"
#: Every phrasing a citation has had: "reference [doc|document] [section] [quirk]", "doc
#: [section]", "quirk", "§"; then one item, or several joined by "and", "to" or a dash
#: (a range names both ends).
CITATION = re.compile(
    r"(?:\breference\s+(?:doc(?:ument)?\s+)?(?:section\s+)?(?:quirk\s+)?"
    r"|\bdoc\s+(?:section\s+)?|\bquirks?\s+|§\s*)"
    rf"(?P<items>{ITEM}(?:\s*(?:-|–|\band\b|\bto\b)\s*{ITEM})*)(?!\w)", re.I)
HEADING = re.compile(r"^#{1,6}\s+(Q\d+|\d+(?:\.\d+)*)(?=\s|$)", re.M)


def cited(text: str) -> list[tuple[int, str]]:
    """(line, item) of every citation in ``text``; items as the headings write them (``Q7``,
    ``4.4``)."""
    out = []
    for m in CITATION.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for item in re.findall(ITEM, m.group("items"), re.I):
            out.append((line, item.upper()))
    return out


def numbered_headings(reference_text: str) -> Counter:
    """How many headings start with each number (``4.4``, ``Q7``)."""
    return Counter(m.group(1).upper() for m in HEADING.finditer(reference_text))


def files(root: Path, scanned: Iterable[str] = SCANNED) -> list[Path]:
    out = []
    for name in scanned:
        path = root / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        out += [p for p in candidates if p.is_file() and p.suffix in SUFFIXES
                and "__pycache__" not in p.parts]
    return out


def problems(paths: Iterable[Path], reference_text: str, root: Path) -> list[str]:
    """One line per citation that names no heading or more than one, and per number that more
    than one heading starts with."""
    headings = numbered_headings(reference_text)
    out = [f"docs/reference.md: {n} headings start with {item}"
           for item, n in headings.items() if n > 1]
    for path in paths:
        for line, item in cited(path.read_text(errors="replace")):
            if headings[item] != 1:
                out.append(f"{path.relative_to(root)}:{line}: cites {item}, but "
                           f"{headings[item]} headings of docs/reference.md start with it")
    return out


def test_every_citation_names_exactly_one_heading_of_the_reference_notes():
    paths = files(ROOT)
    assert len(paths) > 50 and REFERENCE in paths
    assert problems(paths, REFERENCE.read_text(), ROOT) == []
    # Not vacuous: the code and tests cite sections and quirks.
    found = {item for p in paths for _, item in cited(p.read_text(errors="replace"))}
    assert {"4.4", "5.6", "Q7", "Q8"} <= found


def test_every_phrasing_is_read_as_a_citation():
    texts = {
        "actor update (reference 4.4).": ["4.4"],
        "trunk depth fixed at 2, reference Q7": ["Q7"],
        "(reference doc 5.6): counts": ["5.6"],
        "Reference quirk Q9, shared_projection": ["Q9"],
        "Environment protocol (reference doc section 1.1); defaults": ["1.1"],
        "follows the reference (doc 1.3): evaluate": ["1.3"],
        "Row-by-row transcription of doc 5.2-5.4 (independent": ["5.2", "5.4"],
        "rules of reference doc 4.3-4.4 (quirks included)": ["4.3", "4.4"],
        "as mtrl implements it (reference doc 1.4 and 2): actor": ["1.4", "2"],
        "Doc 4.4: during update": ["4.4"],
        "# Quirk Q7: depth is fixed": ["Q7"],
        "Reference doc §5.5, settled by a test": ["5.5"],
        "the embeddings (doc 7).": ["7"],
        "the reference code keeps 1M steps; docs 5 times; quirks included": [],
    }
    for text, items in texts.items():
        assert [item for _, item in cited(text)] == items, text


def test_a_made_up_citation_or_a_doubled_heading_is_reported(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(
        "# fine (reference 4.4)\n"
        "# made up: reference Q" "99, and (doc 4" ".9)\n")
    text = REFERENCE.read_text()
    assert problems(files(tmp_path, ("src",)), text, tmp_path) == [
        "src/a.py:2: cites Q99, but 0 headings of docs/reference.md start with it",
        "src/a.py:2: cites 4.9, but 0 headings of docs/reference.md start with it"]
    doubled = text + "\n### 4.4 Gradient flow, again\n"
    assert problems(files(tmp_path, ("src",)), doubled, tmp_path)[:2] == [
        "docs/reference.md: 2 headings start with 4.4",
        "src/a.py:1: cites 4.4, but 2 headings of docs/reference.md start with it"]
