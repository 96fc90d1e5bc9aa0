"""The package map in docs/reproducibility.md is the code's: every folder and module of src/ptsl
named, none that does not exist, so a module added, moved or removed cannot leave it behind; and
every path the page's layout of the rest of the project names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptsl.tools import package_map as pm

from ..conftest import ROOT

PAGE = ROOT / "docs" / "reproducibility.md"


def test_the_page_holds_the_code_s_package_map():
    copy = pm.page_copy(PAGE.read_text())
    assert copy is not None, f"{PAGE}: no package map markers"
    assert copy == pm.package_map(), (
        "docs/reproducibility.md's package map differs from src/ptsl: run "
        "`python -m ptsl.tools.package_map --write`")


def test_the_rest_of_the_project_names_what_exists():
    text = PAGE.read_text()
    block = text.split("The rest of the project:", 1)[1].split("```", 2)[1]
    named = re.findall(r"^(\S+)\s", block, re.M)
    assert {"params.yaml", "pipeline/", "studies/", "tests/"} <= set(named)
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"docs/reproducibility.md names what the project lacks: {missing}"


def test_the_map_names_every_module_and_folder():
    text = pm.package_map()
    for path in pm.PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            assert f"`{path.stem}`" in text, path
    for folder, _, _ in pm.folders():
        assert (pm.PACKAGE.parent / folder).is_dir()
    assert "| `src/ptsl/core/agent/nets/` | Network building blocks" in text


def test_a_new_module_changes_the_map_and_write_puts_it_in(tmp_path):
    package = tmp_path / "src" / "ptsl"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Top: what it is."""\n')
    (package / "core" / "__init__.py").write_text('"""What computes a result: more."""\n')
    (package / "core" / "agent.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text(f"before\n{pm.START}\nold\n{pm.END}\nafter\n")
    assert pm.write(page, package) is True
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("after\n")
    assert pm.page_copy(text) == (
        "| folder | what it holds | modules |\n|---|---|---|\n"
        "| `src/ptsl/core/` | What computes a result | `agent` |\n")
    assert pm.write(page, package) is False
    (package / "core" / "loop.py").write_text("")
    assert pm.write(page, package) is True
    assert "`agent`, `loop`" in page.read_text()


def test_a_page_without_markers_is_one_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("no map here\n")
    with pytest.raises(SystemExit, match="no package map markers"):
        pm.write(page)
    assert page.read_text() == "no map here\n"


def test_the_command_prints_the_map(capsys):
    assert pm.main([]) == 0
    assert capsys.readouterr().out == pm.package_map()
    assert Path(pm.PAGE) == Path("docs/reproducibility.md")
