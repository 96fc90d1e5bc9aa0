"""A grid worker's job on a real git checkout and real DVC: the stage and its evaluation run in
one `dvc repro`; when only the evaluation fails, the trained stage stands (its outputs in the
shared cache) and the fan-in is left to run the evaluation again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from ptsl.ops.workspace import StageJob, run_job

DVC_YAML = {"stages": {
    "train": {"cmd": f"{sys.executable} -c \"open('model.txt', 'w').write('trained')\"",
              "outs": ["model.txt"]},
    "evaluate": {"cmd": f"{sys.executable} -c \"import sys; sys.exit(EXIT)\"",
                 "deps": ["model.txt"], "outs": ["eval.txt"]},
}}


def _project(root: Path, evaluation_exit: int) -> str:
    spec = yaml.safe_dump(DVC_YAML).replace("EXIT", str(evaluation_exit))
    if evaluation_exit == 0:  # an evaluation that works writes its output
        spec = spec.replace("sys.exit(0)", "open('eval.txt', 'w').write('ok')")
    root.mkdir()
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    (root / "dvc.yaml").write_text(spec)
    return _commit(root)


def _commit(root: Path) -> str:
    """Commit everything; returns the commit."""
    for cmd in (["git", "add", "-A"], ["git", "-c", "user.name=t", "-c", "user.email=t@t",
                                       "commit", "-qm", "p"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


def _job(root: Path, commit: str) -> StageJob:
    return StageJob(stage="train", repo=str(root), folder="", commit=commit,
                    cache=str(root / ".dvc" / "cache"), scratch=str(root / ".scratch"),
                    then=("evaluate",))


def test_a_job_runs_its_stage_and_evaluation_in_the_shared_cache(tmp_path):
    root = tmp_path / "ok"
    out = run_job(_job(root, _project(root, 0)))
    assert out.ok and out.also == ("evaluate",), Path(out.log).read_text()
    log = Path(out.log).read_text()
    assert log.count("$ ") == 1 and "repro --single-item train evaluate" in log  # one process
    assert out.lock is not None and out.lock["outs"][0]["path"] == "model.txt"
    assert any((root / ".dvc" / "cache").rglob("*"))  # the workspace wrote to the shared cache


def test_an_evaluation_that_fails_leaves_the_trained_stage_standing(tmp_path):
    root = tmp_path / "failing"
    out = run_job(_job(root, _project(root, 3)))
    log = Path(out.log).read_text()
    assert out.ok and out.also == (), log
    assert "grid: evaluate failed in the worker; the fan-in runs it" in log
    assert out.lock is not None


def test_a_stage_that_fails_fails_the_job(tmp_path):
    root = tmp_path / "broken"
    _project(root, 0)
    spec = yaml.safe_load((root / "dvc.yaml").read_text())
    spec["stages"]["train"]["cmd"] = f"{sys.executable} -c \"import sys; sys.exit(4)\""
    (root / "dvc.yaml").write_text(yaml.safe_dump(spec))
    out = run_job(_job(root, _commit(root)))
    assert not out.ok and out.also == ()
    assert "failed in the worker" not in Path(out.log).read_text()
