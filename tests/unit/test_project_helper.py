"""The test projects' DVC set-up (tests/pipeline_project.py) is what the two DVC commands make."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ..conftest import ROOT
from ..pipeline_project import _dvc_init, dvc


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but git's own, by relative path (DVC's time stamp left out)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts[:1]
            and p.name != "btime"}


@pytest.mark.parametrize("no_scm", [True, False], ids=["no-scm", "git"])
def test_dvc_init_in_process_writes_what_the_commands_write(tmp_path, no_scm):
    made = {}
    for how in ("commands", "api"):
        root = tmp_path / how
        root.mkdir()
        if not no_scm:
            subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        if how == "commands":
            dvc(root, "init", "-q", *(["--no-scm"] if no_scm else []))
            dvc(root, "config", "plots.html_template", "plots/offline.html")
            shutil.copytree(ROOT / ".dvc" / "plots", root / ".dvc" / "plots")
        else:
            _dvc_init(root, no_scm=no_scm)
        made[how] = _files(root)
    assert made["api"] == made["commands"]
    assert b"html_template = plots/offline.html" in made["api"][".dvc/config"]
    assert (".dvc/.gitignore" in made["api"]) is not no_scm
