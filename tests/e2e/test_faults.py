"""Fault injection through the real training stage: SIGKILL at five points, a NaN reward, a
diverging learning rate, a full disk (the file-size limit of the process), an unreachable or
broken tracking store. Every case checks what the stage left behind: its outputs, its scratch
checkpoints and, where it runs tracked, its MLflow runs."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ..pipeline_project import env_for, make_project

EXPERIMENTS = {"tiny": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 400,
                        "num_layers": 3, "label": "Tiny"}}
# Episodes of 20 steps, 20 random steps, evaluations and checkpoints every 20: checkpoints at
# 20 and 40, evaluations at 0, 20, 40 and 60. 400x3 networks make model.pt (6.8 MB) far larger
# than the curve, the summary and the task cache, so a file-size limit between them fails only
# the checkpoint and output writes.
TRAIN = {"steps": 60, "long_steps": 60, "eval_every": 20, "checkpoint_every": 20}
RUN = "tiny-1"
OUTPUTS = ("curve.csv", "model.pt", "model.pt.sha256", "summary.json")
FILE_LIMIT = 3 * 2**20


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A tiny project and the outputs of one uninterrupted run under ``baseline/``.

    The baseline trains untracked: the tracked reruns must still write its bytes (what a
    training stage writes does not depend on MLflow)."""
    root = make_project(tmp_path_factory.mktemp("faults"), EXPERIMENTS, seeds=[1])
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["train"].update(TRAIN)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = stage(root, "--out", "baseline", env=NO_TRACKING)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


NO_TRACKING = {"PTSL_TRACKING": "off"}


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory) -> Path:
    """A new, empty MLflow store (tables made, no run), made once: each case copies it rather
    than have its stage create the tables again (MLflow's migrations, seconds each time)."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    assert db.is_file()
    return db


@pytest.fixture
def store(empty_store, tmp_path) -> Path:
    """This case's own MLflow store: new and empty."""
    return Path(shutil.copy2(empty_store, tmp_path / "mlflow.db"))


def stage(root: Path, *args: str, fault: str | None = None, store: Path | None = None,
          file_limit: int | None = None, env: dict[str, str] | None = None,
          timeout: int = 300) -> subprocess.CompletedProcess:
    """``python pipeline/train.py --exp tiny --seed 1`` in ``root``, with an own MLflow store."""
    full = env_for(root)
    full["MLFLOW_TRACKING_URI"] = f"sqlite:///{store or root / 'mlflow.db'}"
    if fault:
        full["PTSL_FAULT"] = fault
    full.update(env or {})

    def limit() -> None:  # a full disk, as the kernel reports it to this process (EFBIG)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run([sys.executable, "pipeline/train.py", "--exp", "tiny", "--seed", "1",
                           *args], cwd=root, env=full, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit if file_limit else None)


def reset(root: Path) -> None:
    shutil.rmtree(root / "data" / "runs", ignore_errors=True)
    shutil.rmtree(root / ".scratch" / "resume", ignore_errors=True)


def checkpoints(root: Path) -> list[str]:
    folder = root / ".scratch" / "resume"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The stage's one error line (and no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def assert_same_as_baseline(root: Path) -> None:
    out = root / "data" / "runs" / RUN
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (root / "baseline" / RUN / name).read_bytes(), name
    assert not [p for p in (root / "data" / "runs").iterdir() if p.name != RUN]  # no temp dir


def train_runs(store: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name("train")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    steps = {r.info.run_id: [m.step for m in client.get_metric_history(r.info.run_id,
                                                                      "eval/success")]
             for r in runs}
    return [(r, steps[r.info.run_id]) for r in runs]


# point, its n-th occurrence, the checkpoint step the rerun resumes from (None: from scratch),
# the evaluation steps the killed run's MLflow curve keeps.
KILLS = [
    ("warmup", 5, None, [0]),          # a random-action step before any checkpoint
    ("update", 25, 20, [0, 20]),       # the 25th gradient step (step 24), after checkpoint 20
    ("eval", 30, 20, [0]),             # mid-way through the evaluation at step 20
    ("checkpoint", 2, 20, [0, 20]),    # writing checkpoint 40: new checksum, data not renamed
    ("outputs", 1, 40, [0, 20, 40, 60]),  # writing model.pt/curve.csv/summary.json
]


@pytest.mark.parametrize("point,nth,resume_from,killed_curve", KILLS,
                         ids=[k[0] for k in KILLS])
def test_sigkill_then_rerun_resumes_to_identical_outputs(project, store, point, nth,
                                                         resume_from, killed_curve):
    reset(project)
    killed = stage(project, fault=f"kill@{point}:{nth}", store=store)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (project / "data" / "runs" / RUN).exists()  # nothing half-written in place
    saved = [n for n in checkpoints(project) if n.endswith(".pt")]
    assert [int(n[-12:-3]) for n in saved] == ([resume_from] if resume_from else [])

    rerun = stage(project, store=store)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    # With no checkpoint (warmup) the rerun is a second whole run with its own MLflow store:
    # what DVC records of a training stage is a function of its inputs only (no wall time).
    assert_same_as_baseline(project)
    summary = json.loads((project / "data" / "runs" / RUN / "summary.json").read_text())
    assert "wall_seconds" not in summary and "resumed_from" not in summary
    assert checkpoints(project) == []  # finished: checkpoints, temp files and lone checksums gone

    (old, old_curve), (new, new_curve) = train_runs(store)
    assert old.info.status == "KILLED" and old.info.run_name == f"{RUN} (killed)"
    assert old_curve == killed_curve  # metrics reached the store at every evaluation
    assert new.info.status == "FINISHED" and new.info.run_name == RUN
    assert new_curve == [0, 20, 40, 60]  # one run holds the whole curve
    assert new.data.tags["ptsl.previous_run"] == old.info.run_id
    assert old.data.tags["ptsl.resumed_by"] == new.info.run_id
    assert new.data.tags.get("ptsl.resumed_at_step") == (str(resume_from) if resume_from
                                                         else None)
    assert new.data.metrics["resumed_from"] == (resume_from or 0)


def test_sigterm_ends_the_mlflow_run_as_killed(project, store):
    reset(project)
    env = env_for(project)
    env.update(MLFLOW_TRACKING_URI=f"sqlite:///{store}", PTSL_THREADS="1")
    proc = subprocess.Popen([sys.executable, "pipeline/train.py", "--exp", "tiny", "--seed", "1",
                             "--params", "long.yaml"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not checkpoints(project):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("error: interrupted")
    ((run, _),) = train_runs(store)
    assert run.info.status == "KILLED"
    assert not (project / "data" / "runs" / RUN).exists()


@pytest.fixture(autouse=True)
def _long_params(project):
    """long.yaml: the same run trained far longer (something to interrupt)."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["train"].update(steps=20000, long_steps=20000, eval_every=20)
    (project / "long.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_nan_reward_stops_the_stage_before_anything_broken_is_saved(project, store):
    reset(project)
    proc = stage(project, fault="nan_reward@25", store=store)
    assert proc.returncode == 2
    line = error_line(proc)
    assert line.startswith("error: training stopped at step ") and "= nan is not finite" in line
    step = int(line.split("step ")[1].split(":")[0])
    assert 25 <= step < 40  # caught at the end of the episode in which it happened
    assert not (project / "data" / "runs" / RUN).exists()
    # Only the checkpoint from before the fault exists: none of the broken model.
    assert [n for n in checkpoints(project) if n.endswith(".pt")] == [
        n for n in checkpoints(project) if n.endswith("000000020.pt")]
    ((run, _),) = train_runs(store)
    assert run.info.status == "FAILED"


def test_diverging_learning_rate_stops_the_stage_naming_the_loss(project):
    reset(project)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["sac"]["critic_lr"] = 1.0e6
    (project / "diverge.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # What stops the stage is under test, not MLflow (the NaN case checks its run is FAILED).
    proc = stage(project, "--params", "diverge.yaml", env=NO_TRACKING)
    assert proc.returncode == 2
    line = error_line(proc)
    assert line.startswith("error: training stopped at step "), line
    assert ("critic_loss = " in line and ("exceeds the guard 1e+08" in line
                                          or "is not finite" in line)) or "weight" in line, line
    assert not (project / "data" / "runs" / RUN).exists()


# The full-disk cases run untracked: what a full disk must not break is the checkpoint and the
# outputs (MLflow's own writes under a failing store: test_store_failing_mid_run_...).
def test_full_disk_while_checkpointing_keeps_the_previous_checkpoint(project):
    reset(project)
    assert stage(project, fault="kill@update:25", env=NO_TRACKING).returncode == -signal.SIGKILL
    before = {n: (project / ".scratch" / "resume" / n).read_bytes() for n in checkpoints(project)}
    assert sorted(before) == [n for n in sorted(before) if "000000020" in n] and len(before) == 2

    full = stage(project, file_limit=FILE_LIMIT, env=NO_TRACKING)
    assert full.returncode == 2
    line = error_line(full)
    assert "could not write the resume checkpoint (File too large)" in line, line
    assert "000000040.pt" in line
    after = {n: (project / ".scratch" / "resume" / n).read_bytes() for n in checkpoints(project)}
    assert after == before  # previous checkpoint intact, no temp file, no lone checksum
    assert not (project / "data" / "runs" / RUN).exists()

    # With space again: resumes and finishes.
    assert stage(project, env=NO_TRACKING).returncode == 0
    assert_same_as_baseline(project)


def test_full_disk_while_writing_outputs_leaves_no_output(project):
    reset(project)
    assert stage(project, fault="kill@outputs", env=NO_TRACKING).returncode == -signal.SIGKILL
    before = checkpoints(project)
    full = stage(project, file_limit=FILE_LIMIT, env=NO_TRACKING)
    assert full.returncode == 2
    line = error_line(full)
    assert f"data/runs/{RUN}: could not write the training outputs (File too large)" in line
    assert not (project / "data" / "runs" / RUN).exists()
    assert [p.name for p in (project / "data" / "runs").iterdir()] == []  # no temp folder
    assert checkpoints(project) == before  # the run can still resume from step 40
    assert stage(project, env=NO_TRACKING).returncode == 0
    assert_same_as_baseline(project)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_tracking_server_fails_fast_before_training(project):
    reset(project)
    uri = f"http://127.0.0.1:{_free_port()}"
    t0 = time.perf_counter()
    proc = stage(project, env={"MLFLOW_TRACKING_URI": uri})
    assert proc.returncode == 2
    line = error_line(proc)
    assert line.startswith(f"error: MLFLOW_TRACKING_URI={uri}: MLflow server not reachable")
    assert time.perf_counter() - t0 < 60  # no minutes of retries
    assert checkpoints(project) == [] and not (project / "data" / "runs").exists()


def test_corrupt_tracking_store_is_one_line(project, tmp_path):
    reset(project)
    store = tmp_path / "mlflow.db"
    store.write_bytes(b"this is not an SQLite database" * 100)
    proc = stage(project, store=store)
    assert proc.returncode == 2
    line = error_line(proc)
    assert line.startswith(f"error: {store}: MLflow tracking store is not a readable MLflow "
                           "store"), line
    assert checkpoints(project) == []


def test_locked_tracking_store_is_one_line(project, store):
    reset(project)
    holder = sqlite3.connect(store, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the store's write lock
    try:
        proc = stage(project, store=store)
    finally:
        holder.rollback()
        holder.close()
    assert proc.returncode == 2
    assert error_line(proc) == (f"error: {store}: MLflow tracking store is locked by another "
                                "process (wait for it, or end it)")


def test_store_failing_mid_run_warns_once_and_training_goes_on(tmp_path, store, monkeypatch,
                                                               capsys):
    from ptsl.ops.tracking import start_run

    monkeypatch.setenv("PTSL_TRACKING", "on")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    tracker = start_run("train", "outage-1", stage="train@outage-1", root=tmp_path)
    tracker.log_metrics({"eval/success": 0.5}, 0)
    tracker.flush()
    os.chmod(store, 0o444)
    if os.access(store, os.W_OK):  # root ignores file modes: take the store away instead
        store.unlink()
        store.mkdir()
    for step in (1, 2):
        tracker.log_metrics({"eval/success": 0.5}, step)
        tracker.flush()
    tracker.end()
    err = capsys.readouterr().err
    assert err.count("warning: MLflow tracking failed") == 1, err
    assert tracker.failed
