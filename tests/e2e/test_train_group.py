"""``pipeline/train.py --seed 2 --seed 3``: one process trains two seeds side by side and writes
each seed's outputs byte for byte as the seed's own stage command does, with an MLflow run per
seed; seeds whose settings differ beyond the seed (a long-table seed) are refused in one line."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT
from ..pipeline_project import env_for, make_project

# Seed 1 is the long table's (60 steps), seeds 2 and 3 train the short budget.
EXPS = {"t_mtsac": {"benchmark": "mt10", "method": "mtsac", "hidden_dim": 24, "num_layers": 2,
                    "long": True}}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("group"), EXPS, seeds=[1, 2, 3], long_steps=60)


def _train(root, *seeds: int) -> subprocess.CompletedProcess:
    args = [a for s in seeds for a in ("--seed", str(s))]
    return subprocess.run([sys.executable, str(ROOT / "pipeline" / "train.py"), "--exp",
                           "t_mtsac", *args], cwd=root, env=env_for(root), capture_output=True,
                          text=True, timeout=600)


def _outputs(root, seed: int) -> dict[str, bytes]:
    folder = root / "data" / "runs" / f"t_mtsac-{seed}"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_seeds_in_one_process_write_what_their_own_commands_write(project):
    proc = _train(project, 2, 3)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "t_mtsac-2: success" in proc.stdout and "t_mtsac-3: success" in proc.stdout
    together = {seed: _outputs(project, seed) for seed in (2, 3)}
    shutil.rmtree(project / "data" / "runs")
    for seed in (2, 3):
        assert _train(project, seed).returncode == 0
        assert _outputs(project, seed) == together[seed]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("train").experiment_id])
    assert sorted(r.data.tags["seed"] for r in runs) == ["2", "2", "3", "3"]
    assert sorted(r.data.tags.get("seed_group") or "" for r in runs) == ["", "", "2,3", "2,3"]


def test_seeds_of_different_budgets_are_refused_in_one_line(project):
    before = sorted(p.name for p in (project / "data").rglob("*"))
    proc = _train(project, 1, 2)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: --seed: seeds 1 and 2 of t_mtsac differ in more than their seed"), lines
    assert sorted(p.name for p in (project / "data").rglob("*")) == before
