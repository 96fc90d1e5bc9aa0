"""The grid end to end on a tiny budget: four training stages through a local Ray with two
workers (real Ray, real DVC, real Meta-World, a real MLflow store), fanned in through the run
cache, compared byte for byte with a serial `dvc repro` of the same stages; then what only the
machine decides leaves every stage up to date; then a killed stage is reported, the
others finish, and a rerun runs only it, resumed from its scratch checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ptsl.ops.grid import default_gpus_per_run, trained_here, why_trained
from ptsl.ops.progress import bar_state
from ptsl.ops.workspace import lock_stages, uncommitted_inputs

from ..pipeline_project import dvc, env_for, make_project

EXPERIMENTS = {
    "tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                   "num_layers": 2, "label": "Tiny MT-SAC"},
    "tiny_care": {"benchmark": "reach-v3", "method": "care", "hidden_dim": 32,
                  "num_layers": 2, "label": "Tiny CARE"},
}
SEEDS = [1, 2]
STAGES = sorted(f"train@{e}-{s}" for e in EXPERIMENTS for s in SEEDS)
SERIAL = ("train@tiny_care-2",)
TIMINGS: dict[str, float] = {}


def grid(project: Path, *args: str, env: dict[str, str] | None = None,
         timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptsl.ops.grid", *args], cwd=project,
                          env={**env_for(project), **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def gridded(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("grid"), EXPERIMENTS, seeds=SEEDS, git=True)
    t0 = time.perf_counter()
    # A task cache of its own, empty: the grid builds each seed's task list ahead of its stages.
    cache = root.parent / "grid-task-cache"
    proc = grid(root, "--workers", "2", env={"PTSL_TASK_CACHE": str(cache)})
    TIMINGS["grid (all stages)"] = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root, proc


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """`make repro`'s form where the workers cannot run the checkout: a git project whose
    params.yaml has an uncommitted edit is refused by the grid with one line, and `--else-here`
    runs `dvc repro` here instead, one stage after another. Its one training stage is one of the
    grid's four (each costs two processes; the thread count's effect is
    tests/e2e/test_thread_count.py's): what a worker trained in its own clone, with one torch
    thread, must be what a serial `dvc repro` trains here. Untracked: the grid's MLflow runs are
    checked above, and a training stage's outputs must not depend on tracking either. Its params
    are the grid's but for what no training stage reads: the rows and seeds listed (this one) and
    the uncommitted edit (the report's bootstrap draws)."""
    (name, seed), = (s.removeprefix("train@").rsplit("-", 1) for s in SERIAL)
    root = make_project(tmp_path_factory.mktemp("serial"), {name: EXPERIMENTS[name]},
                        seeds=[int(seed)], git=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["report"]["bootstrap_reps"] = 100
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    refused = grid(root, "--workers", "1")
    # What the refused call left behind, before the second call writes anything.
    left = [p for p in ("data/runs", "mlflow.db") if (root / p).exists()]
    t0 = time.perf_counter()
    here = grid(root, "--else-here", env={"PTSL_TRACKING": "off"})
    TIMINGS["serial dvc repro, 1 stage"] = time.perf_counter() - t0
    return root, refused, left, here


def test_grid_trains_in_workers_and_fans_in_without_training(gridded):
    root, proc = gridded
    out = proc.stdout
    assert "grid: 4 training stage(s) on Ray (2 CPUs" in out
    for stage in STAGES:
        assert f"done: {stage} in " in out
        assert f"Stage '{stage}' is cached - skipping run" in out  # the final dvc repro
    assert "grid: 4 done, 0 running, 0 failed, 0 left of 4" in out
    assert "task list" not in out  # no warning: both lists were built ahead, once each
    lists = (root.parent / "grid-task-cache").glob("*.pkl")
    assert sorted(p.name.split("-mw")[0] for p in lists) == ["reach-v3-seed1", "reach-v3-seed2"]
    fan_in = out[out.index("$ dvc repro"):]
    assert trained_here(fan_in) == [] and "Running stage 'aggregate'" in fan_in
    # Each worker evaluated its run after training it: the fan-in restores both.
    logs = root / ".scratch" / "grid" / "logs"
    for stage in STAGES:
        evaluation = stage.replace("train@", "evaluate@")
        assert f"Running stage '{evaluation}'" in (logs / f"{stage}.log").read_text()
        # The place the grid reports while a stage runs, read from its real log: here its end.
        assert re.fullmatch(r"([\d,]+) of \1 steps \(100%\), [\d.]+ steps/s, 00:00 left",
                            bar_state(logs / f"{stage}.log")), bar_state(logs / f"{stage}.log")
        assert f"Stage '{evaluation}' is cached - skipping run" in fan_in
    assert "Running stage 'evaluate@" not in fan_in
    for e in EXPERIMENTS:
        for s in SEEDS:
            run = root / "data" / "runs" / f"{e}-{s}"
            assert sorted(p.name for p in run.iterdir()) == ["curve.csv", "model.pt",
                                                             "model.pt.sha256", "summary.json"]
            assert (root / "data" / "eval" / f"{e}-{s}.json").is_file()
    assert (root / "reports" / "results.md").is_file()
    # validate always runs (it has no outputs to be stale by): nothing else is left to do.
    assert json.loads(dvc(root, "status", "--json").stdout) == {"validate": ["always changed"]}
    assert list((root / ".scratch" / "grid" / "workspaces").iterdir()) == []


def test_mlflow_holds_one_finished_run_per_stage(gridded):
    from mlflow.tracking import MlflowClient

    root, _ = gridded
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("train").experiment_id])
    assert sorted(r.data.tags["dvc_stage"] for r in runs) == STAGES
    assert all(r.info.status == "FINISHED" for r in runs)
    assert all("host" in r.data.tags for r in runs)
    evaluations = client.search_runs([client.get_experiment_by_name("evaluate").experiment_id])
    assert sorted(r.data.tags["dvc_stage"] for r in evaluations) == [
        s.replace("train@", "evaluate@") for s in STAGES]
    # Workers wrote to the main store and its artifact folder, not their workspaces'.
    assert all(r.info.artifact_uri.startswith((root / "mlartifacts").as_uri())
               for r in [*runs, *evaluations])


def test_grid_equals_serial_repro(gridded, serial):
    """Every output byte for byte (model.pt included: its bytes depend on the weights only)."""
    root, _ = gridded
    serial = serial[0]
    for stage in SERIAL:
        run_name = stage.removeprefix("train@")
        run, ref = root / "data" / "runs" / run_name, serial / "data" / "runs" / run_name
        for name in ("curve.csv", "model.pt", "model.pt.sha256", "summary.json"):
            assert (run / name).read_bytes() == (ref / name).read_bytes(), f"{run_name}/{name}"
    fan_out = gridded[1].stdout.split("grid: fan-out ")[-1].splitlines()[0]
    print(f"\nwall time: {TIMINGS}; grid fan-out: {fan_out}")


def test_rerun_runs_nothing(gridded):
    root, _ = gridded
    proc = grid(root, "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "on Ray" not in proc.stdout
    assert re.findall(r"Running stage '([^']+)'", proc.stdout) == ["validate"], proc.stdout
    # A selection (--only) of up-to-date stages selects nothing; one that names no training
    # stage is one line, before any worker starts.
    only = grid(root, "--only", "train@tiny_care-*", "--dry")
    assert only.returncode == 0 and only.stdout.startswith("0 stale training stage(s)")
    typo = grid(root, "--only", "train@tiny_sac-*")
    assert typo.returncode == 2 and typo.stdout == ""
    assert typo.stderr.strip().splitlines() == [
        "error: --only 'train@tiny_sac-*' matches no training stage here; they are "
        "train@tiny_mtsac-1, train@tiny_mtsac-2, train@tiny_care-1, train@tiny_care-2 (shell "
        "patterns: train@mt10_mtsac-*, *-2)"]


def _lock_from_elsewhere(root: Path, stages: list[str]) -> None:
    """Commit ``root``'s dvc.lock as a machine whose runs differ from this one's would have
    written it (a GPU, another CPU): ``stages``' outputs under hashes no cache here holds."""
    lock = root / "dvc.lock"
    text = lock.read_text()
    for stage in stages:
        for out in yaml.safe_load(text)["stages"][stage]["outs"]:
            real = out["md5"]
            text = text.replace(real, hashlib.md5(real.encode()).hexdigest() + ".dir")
    lock.write_text(text)
    _commit(root, "dvc.lock from elsewhere")


def _commit(root: Path, message: str) -> None:
    """Commit everything (dvc.lock and the reports, as the project does)."""
    for cmd in (["add", "-A"], ["commit", "-qm", message]):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)


def _outs(lock: Path) -> dict[str, list[str]]:
    stages = yaml.safe_load(lock.read_text())["stages"]
    return {name: [o["md5"] for o in entry["outs"]] for name, entry in stages.items()
            if name.startswith("train@")}


def test_a_dvc_lock_from_elsewhere_gives_way_to_what_the_workers_trained(gridded, tmp_path):
    """A fresh clone whose committed dvc.lock names, for one stage, outputs no cache holds: a
    worker trains that one once, the other three (outputs in the shared cache) are trained by
    nobody, the fan-in trains none, and the new dvc.lock records the worker's outputs."""
    root, _ = gridded
    _commit(root, "grid results")
    first = _outs(root / "dvc.lock")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, capture_output=True)
    elsewhere = ["train@tiny_care-2"]
    _lock_from_elsewhere(clone, elsewhere)
    dvc(clone, "cache", "dir", "--local", str(root / ".dvc" / "cache"))  # every real output
    dvc(clone, "config", "--local", "core.autostage", "true")  # as the project's .dvc/config
    dry = grid(clone, "--dry").stdout.splitlines()
    assert dry[:2] == ["1 stale training stage(s)", "  train@tiny_care-2"]
    assert dry[2].startswith("3 training stage(s) restored from the cache by the final dvc "
                             "repro: ")

    proc = grid(clone, "--workers", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "grid: 1 training stage(s) on Ray" in proc.stdout
    logs = clone / ".scratch" / "grid" / "logs"
    assert sorted(p.stem for p in logs.iterdir()) == elsewhere
    for stage in elsewhere:  # trained once, by a worker
        assert f"Running stage '{stage}'" in (logs / f"{stage}.log").read_text()
    fan_in = proc.stdout[proc.stdout.index("$ dvc repro"):]
    assert trained_here(fan_in) == []
    for stage in STAGES:
        assert f"Stage '{stage}' is cached - skipping run" in fan_in
    assert _outs(clone / "dvc.lock") == first  # what the workers trained, as the first grid
    # Only the contents change: the entries keep their order, so the diff to commit is small.
    assert list(lock_stages(clone)) == list(lock_stages(root))
    # DVC stages what it writes (autostage): git's index holds the reordered file too.
    assert subprocess.run(["git", "diff", "--quiet", "--", "dvc.lock"], cwd=clone).returncode == 0
    again = grid(clone, "--workers", "2")
    assert re.findall(r"Running stage '([^']+)'", again.stdout) == ["validate"], again.stdout


def test_the_grid_names_why_a_stage_was_trained_again_here():
    worker = {"cmd": "python pipeline/train.py --exp a --seed 1",
              "deps": [{"path": "src/ptsl", "md5": "aaa.dir"}, {"path": "dvc.yaml", "md5": "b"}],
              "params": {"params.yaml": {"sac": {"batch_size": 32}}}}
    here = {**worker, "deps": [{"path": "src/ptsl", "md5": "ccc.dir"}, worker["deps"][1]]}
    assert why_trained("train@a-1", worker, here, pull=False) == (
        "train@a-1: dependency src/ptsl differs between the worker and here "
        "(md5 aaa.dir there, ccc.dir here)")
    params = {**worker, "params": {"params.yaml": {"sac": {"batch_size": 64}}}}
    assert why_trained("train@a-1", worker, params, pull=False) == (
        "train@a-1: its params differ between the worker and here")
    assert why_trained("train@a-1", worker, worker, pull=True).endswith(
        "the worker's did not reach the DVC remote (see `dvc push --run-cache` in the worker's "
        "log)")
    assert why_trained("train@a-1", None, worker, pull=False) == (
        "train@a-1: the worker left no dvc.lock entry to compare with")


def test_what_only_the_machine_decides_leaves_training_up_to_date(gridded):
    """Another machine's record (a CUDA torch build, a GPU, another host), thread and device
    settings: no stage is stale (the record is no DVC output; validate always runs)."""
    root, _ = gridded
    env_file = root / "reports" / "environment.json"
    record = json.loads(env_file.read_text())
    record["host"] = "gpu-node-7"
    record["versions"]["torch"] = record["versions"]["torch"] + "+cu128"
    record["torch"] = {"cuda_available": True, "device": "cuda", "cuda_device": "NVIDIA H100"}
    env_file.write_text(json.dumps(record))
    machine = {"PTSL_THREADS": "7", "PTSL_DEVICE": "cuda", "OMP_NUM_THREADS": "7"}
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=root,
                            env={**env_for(root), **machine}, capture_output=True, text=True)
    assert set(json.loads(status.stdout)) == {"validate"}
    assert grid(root, "--dry", env=machine).stdout.startswith("0 stale training stage(s)")


def test_uncommitted_params_are_refused_with_one_line(serial):
    root, refused, left, here = serial
    assert uncommitted_inputs(root) == ["params.yaml"]
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("error: uncommitted changes in params.yaml: workers run "
                                      "the commit (git clone), so commit or stash them first")
    assert left == []  # no run trained, no MLflow store made
    # `make repro`'s form: the same stages run here, one after another, with one line saying why.
    assert here.returncode == 0, here.stdout[-3000:] + here.stderr[-3000:]
    assert ("grid: uncommitted changes in params.yaml: workers run the commit (git clone); "
            "running `dvc repro` here instead, one stage after another") in here.stdout
    assert f"Running stage '{SERIAL[0]}'" in here.stdout and "on Ray" not in here.stdout
    run = SERIAL[0].removeprefix("train@")
    assert (root / "data" / "runs" / run / "model.pt").is_file()


def test_gpu_share_follows_the_cpu_share():
    assert default_gpus_per_run(16, 0, 1) == 0
    assert default_gpus_per_run(16, 1, 1) == 0.0625      # 16 runs share one GPU
    assert default_gpus_per_run(16, 2, 2) == 0.25        # 8 runs on 2 GPUs
    assert default_gpus_per_run(2, 4, 1) == 1            # never more than one GPU per run


def _processes() -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every process we can read."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            out.append((int(pid), Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")))
        except OSError:  # it ended meanwhile
            continue
    return out


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _training(exp: str) -> list[int]:
    return [pid for pid, cmd in _processes()
            if b"pipeline/train.py" in cmd and exp.encode() in cmd]


def _kill_when_checkpointed(root: Path, exp: str, target: str, stop: threading.Event,
                            report: dict) -> None:
    """SIGKILL the training process of ``exp`` (or, with ``target`` worker, the Ray worker that
    runs its `dvc repro`) once its scratch checkpoint exists; report what still trains after."""
    while not stop.is_set():
        if list((root / ".scratch" / "resume").glob(f"{exp}-1-*.pt")) and _training(exp):
            pid = _training(exp)[0]
            os.kill(pid if target == "train" else _parent(_parent(pid)), signal.SIGKILL)
            time.sleep(3)
            report["killed"], report["still_training"] = True, _training(exp)
            return
        time.sleep(0.05)


def _train_runs(root: Path, stage: str) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("train")
    return sorted(r.info.status for r in client.search_runs(
        [exp.experiment_id], f"tags.dvc_stage = '{stage}'"))


def _resumed_at(root: Path, stage: str) -> int:
    """The step the finished run of ``stage`` resumed at (its MLflow tag)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("train")
    (run,) = client.search_runs([exp.experiment_id], f"tags.dvc_stage = '{stage}' and "
                                "attributes.status = 'FINISHED'")
    return int(run.data.tags.get("ptsl.resumed_at_step", 0))


@pytest.mark.slow  # two grids of two stages: about two minutes here (make test-slow)
@pytest.mark.parametrize("target", ["train", "worker"])
def test_killed_stage_is_reported_and_resumes_on_rerun(tmp_path, target):
    exps = {"victim": EXPERIMENTS["tiny_mtsac"], "survivor": EXPERIMENTS["tiny_care"]}
    root = make_project(tmp_path, exps, seeds=[1], git=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["train"].update(steps=200, long_steps=200, eval_every=100, checkpoint_every=20)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "commit", "-qam", "longer runs"], cwd=root, check=True,
                   capture_output=True)

    stop, report = threading.Event(), {}
    killer = threading.Thread(target=_kill_when_checkpointed,
                              args=(root, "victim", target, stop, report))
    killer.start()
    try:
        first = grid(root, "--workers", "2")
    finally:
        stop.set()
        killer.join()
    assert report.get("killed"), first.stdout + first.stderr
    assert report["still_training"] == []  # the stage died with its worker, no orphan trains on
    log = root / ".scratch" / "grid" / "logs" / "train@victim-1.log"
    assert first.returncode == 1
    assert f"failed: train@victim-1 (" in first.stdout and f"log: {log}" in first.stdout
    assert f"train@victim-1 (log: {log})" in first.stderr and log.is_file()
    if target == "train":  # DVC saw its stage die
        assert "failed to reproduce 'train@victim-1'" in log.read_text()
    else:  # Ray saw its worker die, and took the stage's processes down with it
        assert "(WorkerCrashedError: " in first.stdout
    assert _train_runs(root, "train@victim-1") == ["KILLED"]
    assert "done: train@survivor-1" in first.stdout
    # The survivor was restored into the main workspace, so only the victim is still stale.
    assert (root / "data" / "runs" / "survivor-1" / "model.pt").is_file()
    assert grid(root, "--dry").stdout.split("\n")[:2] == ["1 stale training stage(s)",
                                                          "  train@victim-1"]
    second = grid(root, "--workers", "2")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "grid: 1 training stage(s) on Ray" in second.stdout
    summary = json.loads((root / "data" / "runs" / "victim-1" / "summary.json").read_text())
    assert summary["final_step"] == 200 and _resumed_at(root, "train@victim-1") > 0
    assert _train_runs(root, "train@victim-1") == ["FINISHED", "KILLED"]
    assert _train_runs(root, "train@survivor-1") == ["FINISHED"]


@pytest.mark.slow  # a Ray cluster of one node, joined by --address: about a minute here
def test_cluster_mode_fans_in_through_a_dvc_remote(tmp_path):
    """--address: workers keep their own DVC caches and push to the remote; the head pulls. With
    no shared cache, only the remote can carry the run cache to the head's final repro."""
    import ray

    root = tmp_path / "project"
    root.mkdir()
    make_project(root, {"tiny_mtsac": EXPERIMENTS["tiny_mtsac"]}, seeds=[1, 2], git=True)
    remote = tmp_path / "remote"
    dvc(root, "remote", "add", "-d", "store", str(remote))
    subprocess.run(["git", "commit", "-qam", "remote"], cwd=root, check=True, capture_output=True)
    stages = ("train@tiny_mtsac-1", "train@tiny_mtsac-2")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20)
    try:
        # The remote is a folder of this machine, which a one-node cluster shares.
        proc = grid(root, "--address", ray.get_runtime_context().gcs_address,
                    "--remote-is-shared")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "taken as mounted at this path on every node (--remote-is-shared)" in proc.stderr
        assert "$ dvc repro --pull" in proc.stdout
        for stage in stages:
            assert f"Stage '{stage}' is cached - skipping run" in proc.stdout
            log = (root / ".scratch" / "grid" / "logs" / f"{stage}.log").read_text()
            assert "repro --pull --single-item" in log and f"push --run-cache {stage}" in log
        assert (remote / "runs").is_dir()

        # A fresh clone (no cache) whose committed dvc.lock names, for one stage, outputs the
        # remote does not hold: that stage is trained once, by its worker; the other is pulled.
        _commit(root, "grid results")
        first = _outs(root / "dvc.lock")
        clone = tmp_path / "clone"
        subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True,
                       capture_output=True)
        _lock_from_elsewhere(clone, ["train@tiny_mtsac-2"])
        proc = grid(clone, "--address", ray.get_runtime_context().gcs_address,
                    "--remote-is-shared")
    finally:
        ray.shutdown()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    logs = clone / ".scratch" / "grid" / "logs"
    assert "Running stage 'train@tiny_mtsac-2'" in (logs / "train@tiny_mtsac-2.log").read_text()
    assert "Running stage" not in (logs / "train@tiny_mtsac-1.log").read_text()
    fan_in = proc.stdout[proc.stdout.index("$ dvc repro --pull"):]
    assert trained_here(fan_in) == []
    for stage in stages:
        assert f"Stage '{stage}' is cached - skipping run" in fan_in
    assert _outs(clone / "dvc.lock") == first
