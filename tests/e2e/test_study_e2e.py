"""A study end to end on a tiny budget: `python -m ptsl.ops.grid --study tiny` trains the study's
stages in workers (real Ray, DVC, Meta-World and MLflow store), evaluates and aggregates into the
study's own lock and reports, logs under the study's MLflow experiments, and leaves the
project's pipeline untouched."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from ptsl.ops.study import sync

from ..pipeline_project import dvc, env_for, make_project

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                              "num_layers": 2, "label": "Tiny MT-SAC"}}


def test_a_study_runs_beside_the_project_with_its_own_lock_reports_and_runs(tmp_path):
    root = make_project(tmp_path, EXPERIMENTS, seeds=[1], git=True)
    folder = root / "studies" / "tiny"
    folder.mkdir(parents=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["seeds"] = [1, 2]
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert sync(root) == [folder / "dvc.yaml"]
    for cmd in (["add", "-A"], ["commit", "-qm", "study"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "ptsl.ops.grid", "--study", "tiny",
                           "--workers", "2"], cwd=root, env=env_for(root), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "grid: 2 training stage(s) on Ray" in proc.stdout
    lock = yaml.safe_load((folder / "dvc.lock").read_text())["stages"]
    assert {"train@tiny_mtsac-1", "train@tiny_mtsac-2", "aggregate"} <= set(lock)
    assert lock["train@tiny_mtsac-1"]["cmd"].startswith("python ../../pipeline/train.py")
    assert (folder / "reports" / "results.md").is_file()
    assert (folder / "data" / "runs" / "tiny_mtsac-2" / "model.pt").is_file()
    assert not (root / "dvc.lock").exists() and not (root / "data" / "runs").exists()
    status = json.loads(dvc(folder, "status", "--json", "dvc.yaml").stdout)
    assert set(status) == {"validate"}, status  # up to date but the always-changed check

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    train = client.get_experiment_by_name("tiny/train")
    runs = client.search_runs([train.experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["tiny_mtsac-1", "tiny_mtsac-2"]
    assert client.get_experiment_by_name("train") is None  # no run in the project's experiments

    # Finished runs kept in a remote inside the checkout (docs/studies.md): on a fresh clone the
    # grid fetches them from the remote named after the study and trains none again.
    dvc(root, "remote", "add", "tiny", "studies/tiny/remote")  # stored relative to .dvc/
    dvc(folder, "push", "-r", "tiny", "train@tiny_mtsac-1", "train@tiny_mtsac-2")
    for cmd in (["add", "-A"], ["commit", "-qm", "study runs"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, capture_output=True)
    dry = subprocess.run([sys.executable, "-m", "ptsl.ops.grid", "--study", "tiny", "--dry"],
                         cwd=clone, env=env_for(clone), capture_output=True, text=True,
                         timeout=300).stdout.splitlines()
    assert dry[0] == "grid: fetching study tiny's finished runs from DVC remote 'tiny'", dry
    assert dry[1] == "0 stale training stage(s)", dry
    assert dry[2] == ("2 training stage(s) restored from the cache by the final dvc repro: "
                      "train@tiny_mtsac-1, train@tiny_mtsac-2")
