"""What re-trains and what does not, on a real DVC project: after a full `dvc repro`, editing
tracking, the MLflow notes, the grid, a view, the README, a report module or the pin of a
package that computes nothing leaves every training stage up to date; editing a file of the
core, or the pin of a package that computes, makes every training stage stale.
(tests/unit/test_import_layers.py checks the rule on dvc.yaml itself.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from ..pipeline_project import env_for, make_project

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 16,
                              "num_layers": 1, "label": "Tiny MT-SAC"}}
EXTRA = {"train": {"steps": 10, "long_steps": 10, "eval_every": 10, "checkpoint_every": 10,
                   "eval_episodes": 1, "eval_stride": 1}}
TRAINING = {"train@tiny_mtsac-1"}


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("deps"), EXPERIMENTS, seeds=[1], extra=EXTRA)
    (root / "README.md").write_text("# tiny\n")
    proc = subprocess.run([str(Path(sys.executable).parent / "dvc"), "repro"], cwd=root,
                          env={**env_for(root), "PTSL_TRACKING": "off"}, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _stale(root) == set()  # each case's copy starts from here
    return root


def _stale(root: Path) -> set[str]:
    proc = subprocess.run([str(Path(sys.executable).parent / "dvc"), "status", "--json"],
                          cwd=root, env=env_for(root), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout)) - {"validate"}  # validate always runs


def append(rel: str, text: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        with open(root / rel, "a") as f:
            f.write(text)
    return apply


def replace(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        text = (root / rel).read_text()
        assert old in text, (rel, old)
        (root / rel).write_text(text.replace(old, new, 1))
    return apply


EDITS = {
    "tracking": append("src/ptsl/ops/tracking.py", "\n# an edit\n"),
    "mlflow-note": replace("src/ptsl/ops/mlflow_ui.py", "One run per DVC evaluation stage",
                           "One MLflow run per DVC evaluation stage"),
    "grid": append("src/ptsl/ops/grid.py", "\n# an edit\n"),
    "view": append("src/ptsl/ops/exps.py", "\n# an edit\n"),
    "readme": append("README.md", "\nMore words.\n"),
    "report-module": append("src/ptsl/report/figures.py", "\n# an edit\n"),
    "mlflow-pin": replace("requirements.txt", "mlflow==", "mlflow>="),
    "ray-pin": replace("requirements.txt", "ray==", "ray>="),
    "matplotlib-pin": replace("requirements/report.txt", "matplotlib==", "matplotlib>="),
}
# What each edit may make stale besides nothing: the report's code and pins re-run aggregate.
REPORTING = {"report-module", "matplotlib-pin"}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edits_outside_the_core_leave_training_up_to_date(ran, tmp_path, edit):
    root = Path(shutil.copytree(ran, tmp_path / "p", symlinks=True))
    EDITS[edit](root)
    assert _stale(root) == ({"aggregate"} if edit in REPORTING else set())


@pytest.mark.parametrize("edit", ["core-file", "compute-pin"])
def test_edits_of_the_computing_code_make_training_stale(ran, tmp_path, edit):
    root = Path(shutil.copytree(ran, tmp_path / "p", symlinks=True))
    {"core-file": append("src/ptsl/core/agent/sac.py", "\n# an edit\n"),
     "compute-pin": replace("requirements/compute.txt", "gymnasium==", "gymnasium>=")}[edit](root)
    stale = _stale(root)
    assert TRAINING <= stale and "aggregate" in stale


def test_relock_records_training_against_new_core_code_keeping_its_outputs(ran, tmp_path):
    """After a core edit that changes no number, ``python -m ptsl.ops.relock --all`` records the
    training and evaluation stages against it with their outputs' hashes as they were, also
    where the outputs are not in the workspace; a changed param is refused in one line."""
    import yaml

    root = Path(shutil.copytree(ran, tmp_path / "p", symlinks=True))
    append("src/ptsl/core/agent/sac.py", "\n# an edit\n")(root)
    before = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    shutil.rmtree(root / "data" / "runs")  # outputs elsewhere: only their hashes are here
    relock = [sys.executable, "-m", "ptsl.ops.relock", "--all"]
    proc = subprocess.run(relock, cwd=root, env=env_for(root), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "train@tiny_mtsac-1: src/ptsl/core" in proc.stdout
    after = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    for name in ("train@tiny_mtsac-1", "evaluate@tiny_mtsac-1"):
        assert after[name]["outs"] == before[name]["outs"]
        assert after[name]["deps"] != before[name]["deps"]
    status = json.loads(subprocess.run([str(Path(sys.executable).parent / "dvc"), "status",
                                        "--json"], cwd=root, env=env_for(root),
                                       capture_output=True, text=True, timeout=300).stdout)
    assert all("changed deps" not in c for c in status.get("train@tiny_mtsac-1", [])
               if isinstance(c, dict))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sac"]["discount"] = 0.9
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = subprocess.run(relock[:-1] + ["train@tiny_mtsac-1"], cwd=root, env=env_for(root),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: train@tiny_mtsac-1: its params differ from its "
                                   "dvc.lock entry; its outputs would change, so `dvc repro` it "
                                   "instead")
