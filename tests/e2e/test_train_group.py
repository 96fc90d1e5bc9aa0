"""``pipeline/train.py --seed 1 --seed 2``: one process trains two seeds side by side and writes
each seed's outputs byte for byte as the seed's own stage command does, with an MLflow run per
seed; seeds whose settings differ beyond the seed (a long-table seed) are refused in one line."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import ROOT
from ..pipeline_project import env_for, make_project

EXPS = {"t_mtsac": {"benchmark": "mt10", "method": "mtsac", "hidden_dim": 24, "num_layers": 2}}


def _train(root, *seeds: int) -> subprocess.CompletedProcess:
    args = [a for s in seeds for a in ("--seed", str(s))]
    return subprocess.run([sys.executable, str(ROOT / "pipeline" / "train.py"), "--exp",
                           "t_mtsac", *args], cwd=root, env=env_for(root), capture_output=True,
                          text=True, timeout=600)


def _outputs(root, seed: int) -> dict[str, bytes]:
    folder = root / "data" / "runs" / f"t_mtsac-{seed}"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_seeds_in_one_process_write_what_their_own_commands_write(tmp_path):
    (tmp_path / "together").mkdir()
    (tmp_path / "alone").mkdir()
    together = make_project(tmp_path / "together", EXPS, seeds=[2, 3])
    alone = make_project(tmp_path / "alone", EXPS, seeds=[2, 3])
    proc = _train(together, 2, 3)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "t_mtsac-2: success" in proc.stdout and "t_mtsac-3: success" in proc.stdout
    for seed in (2, 3):
        assert _train(alone, seed).returncode == 0
        assert _outputs(together, seed) == _outputs(alone, seed)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{together / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    trained = {r.data.tags.get("seed"): r for r in runs if r.data.tags.get("seed_group")}
    assert set(trained) == {"2", "3"}
    assert {r.data.tags["seed_group"] for r in trained.values()} == {"2,3"}


def test_seeds_of_different_budgets_are_refused_in_one_line(tmp_path):
    exps = {"t_mtsac": {**EXPS["t_mtsac"], "long": True}}
    root = make_project(tmp_path, exps, seeds=[1, 2], long_steps=60)  # seed 1 trains longer
    proc = _train(root, 1, 2)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: --seed: seeds 1 and 2 of t_mtsac differ in more than their seed"), lines
    assert not (root / "data" / "runs").exists()
