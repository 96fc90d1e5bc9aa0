"""Eight processes writing to one real MLflow SQLite store at once (what the grid's workers do)
lose no run, no metric and no artifact, and none of them hits "database is locked"."""

from __future__ import annotations

import os
import subprocess
import sys

RUNS = 1  # per writer
WRITER = """
import sys
from pathlib import Path
from ptsl.ops.tracking import start_run

root, i, runs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for r in range(runs):
    tracker = start_run("train", f"w{i}-{r}", stage=f"train@w{i}-{r}", root=root)
    tracker.log_params({"sac": {"batch_size": 128, "tau": 0.005}, "writer": i, "run": r})
    for step in range(100):
        tracker.log_metrics({"eval/success": step / 100, "train/loss": 1.0 / (step + 1)}, step)
        if step % 10 == 0:
            tracker.flush()  # many small transactions: the contended case
    artifact = root / f"w{i}-{r}.txt"
    artifact.write_text(str(i))
    tracker.log_artifact(artifact)
    tracker.end()
"""


def test_eight_concurrent_writers_lose_nothing(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from ptsl.ops.tracking import prepare_store

    monkeypatch.setenv("PTSL_TRACKING", "on")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    env = dict(os.environ)
    uri = prepare_store(("train",), tmp_path)  # what the grid does before its workers start
    assert uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), str(i), str(RUNS)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(8)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-2000:]
        assert "database is locked" not in out

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("train").experiment_id],
                              max_results=1000)
    assert sorted(r.info.run_name for r in runs) == sorted(f"w{i}-{r}" for i in range(8)
                                                           for r in range(RUNS))
    for run in runs:
        assert run.info.status == "FINISHED"
        assert run.data.params["sac.batch_size"] == "128"
        history = client.get_metric_history(run.info.run_id, "eval/success")
        assert [m.step for m in history] == list(range(100))
        assert [a.path for a in client.list_artifacts(run.info.run_id)] == [
            f"{run.info.run_name}.txt"]
