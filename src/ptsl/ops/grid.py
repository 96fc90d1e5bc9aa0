"""The grid: every stale training stage in parallel on Ray, fanned in through DVC's run cache.

``python -m ptsl.ops.grid`` (``make grid``) first checks what the ``validate`` stage checks
(:mod:`ptsl.ops.validate`), then asks DVC which training stages are stale
(``dvc status --json``), runs each one with ``dvc repro --single-item`` in its own workspace (a
clone of the current commit sharing the DVC cache, :mod:`ptsl.ops.workspace`) as a Ray task,
followed there by the stages that read its run (its evaluation; a PTSL run's task branches),
and then runs a plain ``dvc repro`` in the main workspace, which restores every trained and
evaluated stage from the run cache without running it again, evaluates what is left and
aggregates. Before that repro the grid drops the
trained stages' entries from dvc.lock (:func:`adopt_worker_results`): an entry names outputs
trained elsewhere (the commit's, say from another machine), and DVC restores a stage from its
entry alone, training it again when those outputs are not in the cache; without an entry it
looks the stage up in the run cache, where the workers' results are, and records them in the new
dvc.lock. ``--address`` joins a Ray cluster, once it answers and has a DVC default remote every
node reaches (:mod:`ptsl.ops.cluster`); there that remote is the shared cache (workers
``dvc repro --pull`` then ``dvc push --run-cache``, the head ``dvc repro --pull``). Workspaces
and logs live in the scratch folder (``.scratch/grid/``). ``--mps`` runs the stages that share a
GPU under NVIDIA MPS (:mod:`ptsl.ops.mps`).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cli import real, whole
from .cluster import (CONNECT_TIMEOUT_S, SHARED_FLAG, ClusterError, bounded, check_remote,
                      dvc_remotes, probe_cluster)
from .mps import MpsDaemon, MpsError
from .paths import SCRATCH, task_cache_dir
from .progress import Progress
from .stage import USER_ERRORS
from .study import STUDIES, study_dirs, study_of
from .tracking import TRACKING_ENV, close_orphans, experiment_name, prepare_store
from .validate import validate_project
from .workspace import (
    StageJob,
    StageOutcome,
    WorkspaceError,
    head_commit,
    checkout,
    run_job,
    uncommitted_inputs,
)

TRAINING_GROUPS = ("train", "train_ptsl")
# The stages that read a training stage's run (its evaluation; a PTSL run's task branches): its
# worker runs them next, in the same workspace, while the run is at hand.
EVALUATION_OF = {"train": ("evaluate",), "train_ptsl": ("evaluate_ptsl", "branches_ptsl")}
# Variables a worker's stage must see as the head sees them (a cluster node has its own env).
FORWARDED_ENV = ("PTSL_DEVICE", "PTSL_GRAPH", "PTSL_VECTOR", "PTSL_CUDA_WAIT", TRACKING_ENV)
# MPS serves at most 48 client processes per GPU (Volta and later; NVIDIA's MPS guide), so
# under --mps a run takes at least 1/48 of a GPU, rounded up to Ray's 4 decimals.
MPS_MAX_CLIENTS = 48
MPS_MIN_SHARE = math.ceil(10_000 / MPS_MAX_CLIENTS) / 10_000


class GridError(RuntimeError):
    """The grid cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class Resources:
    """Ray resources of one run; ``threads`` is its torch thread count (PTSL_THREADS)."""

    cpus: float
    gpus: float

    @property
    def threads(self) -> int:
        return max(1, math.floor(self.cpus))


def _dvc(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True,
                          text=True, check=False)
    if check and proc.returncode != 0:
        raise GridError(f"dvc {' '.join(args)} failed: "
                        f"{''.join((proc.stderr or proc.stdout).strip().splitlines()[-1:])}")
    return proc


def study_remote(root: Path) -> str | None:
    """The DVC remote that keeps study ``root``'s finished runs in the checkout: the remote named
    after the study (docs/studies.md, ``studies/<name>/remote/``), where the project has one;
    None for the project's own pipeline or a study without one."""
    study = study_of(root)
    if study is None:
        return None
    names = [line.split()[0] for line in _dvc(root, "remote", "list").stdout.splitlines()
             if line.strip()]
    return study[1] if study[1] in names else None


def fetch_study_runs(root: Path) -> None:
    """Bring a study's committed runs from its own remote into the DVC cache before deciding
    what is stale, so that a fresh clone restores its finished runs instead of training them
    again (hours each); a no-op when the cache already holds them."""
    remote = study_remote(root)
    if remote is None:
        return
    print(f"grid: fetching study {root.name}'s finished runs from DVC remote {remote!r}",
          flush=True)
    # The target keeps it to the study's own stages (not the project's, not in that remote).
    _dvc(root, "fetch", "-q", "-r", remote, "dvc.yaml")


def stale_training_stages(root: Path, groups: Sequence[str] = TRAINING_GROUPS
                          ) -> tuple[list[str], list[str]]:
    """Training stages DVC reports as changed (``dvc status --json``), in dvc.yaml order: those
    to train, and those whose only change is outputs missing from the workspace that the cache
    holds (``deleted``; not ``not in cache``), which the fan-in's ``dvc repro`` restores as they
    are, with no worker."""
    # The target keeps it to this folder's pipeline: with none, DVC reports every dvc.yaml of
    # the repository, studies (studies/<name>/dvc.yaml) included.
    status = json.loads(_dvc(root, "status", "--json", "dvc.yaml").stdout or "{}")
    train, restore = [], []
    for key, changes in status.items():
        name = key.split(":")[-1]
        if not is_training(name, groups):
            continue
        cached = all(isinstance(c, dict) and set(c) == {"changed outs"}
                     and set(c["changed outs"].values()) == {"deleted"} for c in changes)
        (restore if cached else train).append(name)
    return train, restore


def seed_major(stages: Sequence[str]) -> list[str]:
    """``train@exp-seed`` stages seed by seed (every row's first seed first, in dvc.yaml order
    within a seed): a grid stopped part-way leaves every row with as many seeds as it could."""
    def seed(stage: str) -> int:
        tail = stage.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    return sorted(stages, key=seed)  # stable: dvc.yaml order within a seed


def select_stages(patterns: Sequence[str], stale: Sequence[str], cached: Sequence[str],
                  every: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ``stale`` and ``cached`` training stages that match one of the shell-style
    ``patterns`` (``--only``). A pattern that names no training stage at all (``every``) is an
    error; one whose stages are all up to date selects nothing."""
    for pattern in patterns:
        if not fnmatch.filter(every, pattern):
            raise GridError(f"--only {pattern!r} matches no training stage here; they are "
                            f"{', '.join(every[:4])}{', ...' if len(every) > 4 else ''} "
                            "(shell patterns: train@mt10_mtsac-*, *-2)")

    def keep(names: Sequence[str]) -> list[str]:
        return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]

    return keep(stale), keep(cached)


def pipeline_stages(root: Path) -> list[str]:
    """Every stage of the pipeline in ``root``, in dvc.yaml order."""
    return _dvc(root, "stage", "list", "--name-only", "dvc.yaml").stdout.split()


def is_training(stage: str, groups: Sequence[str] = TRAINING_GROUPS) -> bool:
    """Whether ``stage`` (``group@item``) belongs to one of the training ``groups``."""
    return "@" in stage and stage.split("@")[0] in groups


def training_stages(names: Sequence[str],
                    groups: Sequence[str] = TRAINING_GROUPS) -> list[str]:
    """The training stages among ``names``."""
    return [n for n in names if is_training(n, groups)]


def evaluation_of(stage: str, names: Sequence[str]) -> tuple[str, ...]:
    """The stages among ``names`` that read training stage ``stage``'s run, in the order they
    run: ``evaluate@mt10_care-1`` for ``train@mt10_care-1``; ``evaluate_ptsl@...`` then
    ``branches_ptsl@...`` for a ``train_ptsl`` stage."""
    group, _, item = stage.partition("@")
    return tuple(f"{g}@{item}" for g in EVALUATION_OF.get(group, ()) if f"{g}@{item}" in names)


def default_gpus_per_run(total_cpus: float, total_gpus: float, cpus_per_run: float) -> float:
    """Share the GPUs among as many runs as the CPUs can hold (the environment steps, on the CPU,
    are the limit), so CPUs and GPUs run out together; 0 without GPUs."""
    if total_gpus <= 0:
        return 0.0
    runs = max(1.0, total_cpus // cpus_per_run)
    return min(1.0, math.floor(total_gpus / runs * 10_000) / 10_000)


def cache_dir(root: Path) -> str:
    """The main workspace's DVC cache, as an absolute path."""
    out = _dvc(root, "cache", "dir").stdout.strip()
    return str((root / out).resolve()) if out else str((root / ".dvc" / "cache").resolve())


def check_cluster(root: Path, address: str, remote_is_shared: bool) -> None:
    """Before anything changes: the cluster at ``address`` answers, and the DVC default remote
    is one its nodes share (:mod:`ptsl.ops.cluster`; a warning line where that is taken on
    trust). A :class:`ClusterError` otherwise."""
    probe_cluster(address)
    warning = check_remote(dvc_remotes(root), remote_is_shared)
    if warning:
        print(warning, file=sys.stderr, flush=True)


def _init_ray(args: argparse.Namespace):
    import logging

    import ray

    opts = {"include_dashboard": False, "log_to_driver": False,
            "logging_level": logging.WARNING}
    if args.address:
        # Ray waits for a cluster that does not answer for as long as it is left running.
        try:
            bounded(lambda: ray.init(address=args.address, **opts), args.connect_timeout,
                    f"--address {args.address}: Ray did not connect within "
                    f"{args.connect_timeout:g} s (--connect-timeout); is it a Ray head's "
                    "address (`ray start --head` prints it)? Nothing was changed")
        except ConnectionError as exc:  # `auto` with no cluster on this machine, say
            raise GridError(f"--address {args.address}: {_first_line(exc)}") from None
    else:
        workers = args.workers or max(1, int((os.cpu_count() or 1) // args.cpus_per_run))
        # Our objects are a few small records: a small object store spares /dev/shm.
        ray.init(num_cpus=workers * args.cpus_per_run, object_store_memory=100 * 2**20, **opts)
    return ray


def _started_board(ray):
    """A Ray actor the tasks tell when they start, so the view can tell running from queued."""

    @ray.remote(num_cpus=0)
    class Board:
        def __init__(self) -> None:
            self.started: list[str] = []

        def start(self, stage: str) -> None:
            self.started.append(stage)

        def stages(self) -> list[str]:
            return self.started

    return Board.remote()


def _task(job: StageJob, board) -> StageOutcome:
    board.start.remote(job.stage)
    return run_job(job)


def task_lists(stages: Sequence[str], params: Any) -> dict[str, tuple[str, int]]:
    """The Meta-World task list, (benchmark, seed), that each ``train@exp-seed`` stage reads."""
    out = {}
    for stage in stages:
        exp, _, seed = stage.partition("@")[2].rpartition("-")
        if exp in params.experiments and seed.isdigit():
            out[stage] = (params.experiments[exp].benchmark, int(seed))
    return out


def _build_task_list(benchmark: str, seed: int, cache: str) -> str:
    """Build one task list into the shared task cache; returns "" or why it failed (the stages
    that read it then build it themselves, and fail there with their own message)."""
    from ..core.envs import load_tasks

    try:
        load_tasks(benchmark, seed, Path(cache))
    except Exception as exc:  # noqa: BLE001 - said by fan_out, met again by the stage
        return f"{type(exc).__name__}: {exc}"
    return ""


def fan_out(jobs: list[StageJob], res: Resources, retries: int, ray,
            lists: Mapping[str, tuple[str, int]] | None = None,
            task_cache: Path | None = None, slots: int = 1) -> list[StageOutcome]:
    """Run ``jobs`` as Ray tasks, in their order; print each end and the counts as they change.

    Each task list that ``lists`` (stage -> (benchmark, seed)) names and ``task_cache`` lacks is
    built first, once, by a task of its own (without this, two stages that started together
    each spent the 40 s of an MT50 list building the same one). While lists are being built,
    the stages that read none of them take the free ``slots`` (runs the cluster holds at once),
    one by one; once every list is there, Ray gets all the rest in order. (A stage handed to
    Ray to wait for its list would start after every stage handed over before the list was
    done: Ray starts tasks in the order they become ready.)"""
    board = _started_board(ray)
    remote = ray.remote(num_cpus=res.cpus, num_gpus=res.gpus, max_retries=retries)(_task)
    lists = lists or {}
    builds: dict[tuple[str, int], Any] = {}
    if task_cache is not None:
        from ..core.envs import task_cache_file

        build = ray.remote(num_cpus=res.cpus, max_retries=retries)(_build_task_list)
        for key in dict.fromkeys(lists.values()):
            if not task_cache_file(*key, task_cache).is_file():
                builds[key] = build.remote(*key, str(task_cache))
    waiting, pending = list(jobs), {}

    def submit(building: Mapping[tuple[str, int], Any]) -> None:
        if building:
            free = slots - len(building) - len(pending)
            chosen = [j for j in waiting if lists.get(j.stage) not in building][:max(0, free)]
        else:
            chosen = list(waiting)
        for job in chosen:
            waiting.remove(job)
            pending[remote.remote(job, board)] = job

    progress, outcomes = Progress(len(jobs), {j.stage: j.log for j in jobs}), []
    progress.show()
    try:
        while pending or waiting:
            # The lists still being built (each ref's state asked of Ray, without waiting).
            building = {key: ref for key, ref in builds.items()
                        if not ray.wait([ref], timeout=0)[0]}
            submit(building)
            ready, _ = ray.wait(list(pending) or list(building.values()), num_returns=1,
                                timeout=2.0)
            for ref in ready:
                if ref not in pending:  # a task list built
                    continue
                job = pending.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker died or was killed
                    out = StageOutcome(job.stage, -1, str(job.log), "?", 0.0,
                                       f"{type(exc).__name__}: {_first_line(exc)}")
                outcomes.append(out)
                progress.running.discard(job.stage)
                if out.ok:
                    progress.done += 1
                    print(f"done: {out.stage} in {out.seconds:.0f} s on {out.host}", flush=True)
                else:
                    progress.failed += 1
                    print(f"failed: {out.stage} ({out.message}); log: {out.log}", flush=True)
            finished = {o.stage for o in outcomes}
            progress.running = {s for s in ray.get(board.stages.remote()) if s not in finished}
            progress.show()
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref)  # the task's finally stops its dvc process group
        print(f"interrupted: {len(pending) + len(waiting)} stage(s) cancelled; run again to go "
              "on (killed stages resume from their scratch checkpoints)", flush=True)
        raise
    for (benchmark, seed), ref in builds.items():  # done by now: their stages have ended
        why = _failure(ray, ref)
        if why:
            print(f"warning: building the {benchmark} task list of seed {seed} ahead failed "
                  f"({why}); its stages built it themselves", flush=True)
    return outcomes


def _failure(ray, ref) -> str:
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:
        return _first_line(exc) or type(exc).__name__


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def close_orphaned_runs(uri: str, stages: Sequence[str], root: Path) -> None:
    """A stage killed mid-run leaves its MLflow run RUNNING; mark the failed stages' as KILLED
    (the stage's next attempt links its run to the killed one)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment_name("train", root))
    for stage in stages:
        close_orphans(client, exp.experiment_id, stage)


def _worker_env(res: Resources, tracking: str | None,
                mps: MpsDaemon | None = None) -> dict[str, str]:
    """The variables a stage process gets on top of its worker's environment."""
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    # One run's share of the cores: PTSL_THREADS for torch, OMP for the libraries under it.
    env.update(PTSL_THREADS=str(res.threads), OMP_NUM_THREADS=str(res.threads),
               MKL_NUM_THREADS=str(res.threads))
    # PTSL_VECTOR=auto would count the node's cores, not the run's share: a worker's tasks step
    # in its own process unless asked otherwise (the same transitions either way).
    env.setdefault("PTSL_VECTOR", "sync")
    if tracking:
        env["MLFLOW_TRACKING_URI"] = tracking
    if mps:
        # A stage that cannot reach the daemon's pipe directory runs without MPS, silently.
        env.update(mps.env())
    return env


def mps_daemon(root: Path) -> MpsDaemon:
    """The MPS daemon ``--mps`` starts or reuses, logging to the scratch folder; a GridError
    or MpsError when MPS cannot work here."""
    if os.environ.get("PTSL_DEVICE") == "cpu":
        raise GridError("--mps shares GPUs among runs, but PTSL_DEVICE=cpu keeps every stage on "
                        "the CPU: unset PTSL_DEVICE or drop --mps")
    return MpsDaemon.for_node(root / SCRATCH / "grid" / "mps-log")


def mps_gpus_per_run(total_gpus: float, gpus_per_run: float, given: bool) -> float:
    """One run's GPU share under ``--mps``: ``gpus_per_run``, the default raised to
    :data:`MPS_MIN_SHARE` where the CPUs would put more runs on a GPU than MPS serves; a
    GridError when there is no GPU to share or a ``given`` share is below that."""
    if total_gpus <= 0:
        raise GridError("--mps: Ray sees no GPU on this machine; MPS shares a GPU among runs, "
                        "so run without --mps")
    if gpus_per_run < MPS_MIN_SHARE:
        if given:
            raise GridError(f"--mps: --gpus-per-run {gpus_per_run:g} puts more than "
                            f"{MPS_MAX_CLIENTS} runs on a GPU, which MPS does not serve; use "
                            f">= {MPS_MIN_SHARE:g}")
        return MPS_MIN_SHARE
    return gpus_per_run


def stop_mps(mps: MpsDaemon) -> None:
    """Quit the daemon if the grid started it; a failure is a warning (the stages' results
    stand) that says how to quit it by hand."""
    try:
        mps.stop()
    except MpsError as exc:
        print(f"warning: {exc}", file=sys.stderr, flush=True)


def adopt_worker_results(root: Path, stages: Sequence[str]) -> None:
    """Drop ``stages``' entries from the main workspace's dvc.lock, so that the fan-in's
    ``dvc repro`` takes them from the run cache (where the workers' results are) and writes the
    workers' outputs into dvc.lock.

    DVC restores a stage whose dvc.lock entry matches its dependencies from that entry only
    (``StageCache.restore``); when the outputs it names are not in the cache (a dvc.lock
    committed from another machine: a GPU, another CPU) it runs the stage, never looking at the
    run cache. With no entry, it restores the run cache's entry for the stage's dependencies and
    params ("is cached - skipping run"). A worker that restored a stage instead of training it
    saved that entry too. Uses DVC's own lock file API.
    """
    from types import SimpleNamespace

    from dvc.dvcfile import LOCK_FILE, Lockfile
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        lock = Lockfile(repo, str(root / LOCK_FILE))
        for stage in stages:
            lock.remove_stage(SimpleNamespace(name=stage))


def lock_order(root: Path) -> list[str]:
    """The stages of dvc.lock, in its order."""
    from .workspace import lock_stages

    return list(lock_stages(root))


def keep_lock_order(root: Path, order: Sequence[str]) -> None:
    """Put dvc.lock's stages back in ``order`` (new ones after): DVC appends the entries it
    writes again, and a committed dvc.lock should change only where its contents did."""
    from dvc.utils.serialize import modify_yaml

    path = root / "dvc.lock"
    if not path.is_file():
        return
    with modify_yaml(path) as data:
        stages = data.get("stages") or {}
        rank = {name: i for i, name in enumerate(order)}
        ordered = type(stages)()
        for name in sorted(stages, key=lambda n: rank.get(n, len(rank))):
            ordered[name] = stages[name]
        data["stages"] = ordered
    _restage(root, path)


def _restage(root: Path, path: Path) -> None:
    """Stage the reordered dvc.lock where DVC stages what it writes (``core.autostage``, as this
    project's .dvc/config sets): git's index would otherwise keep the file as DVC last wrote
    it, and ``git status`` would list a dvc.lock equal to the commit as changed."""
    from dvc.repo import Repo
    from dvc.scm import NoSCM

    with Repo(str(root)) as repo:
        if isinstance(repo.scm, NoSCM) or not repo.config["core"].get("autostage", False):
            return
    subprocess.run(["git", "add", "--", str(path)], cwd=root, check=True, capture_output=True)


def why_trained(stage: str, worker: Mapping[str, Any] | None, here: Mapping[str, Any] | None,
                pull: bool) -> str:
    """Why the fan-in trained ``stage`` although a worker had: what differs between the worker's
    dvc.lock entry and the one the fan-in wrote, else where the run cache entry went missing."""
    if worker is None:
        return f"{stage}: the worker left no dvc.lock entry to compare with"
    here = here or {}
    if worker.get("cmd") != here.get("cmd"):
        return (f"{stage}: its command differs (worker: {worker.get('cmd')!r}, "
                f"here: {here.get('cmd')!r})")

    def deps(entry: Mapping[str, Any]) -> dict[str, Any]:
        return {d["path"]: d.get("md5") for d in entry.get("deps") or []}

    theirs, ours = deps(worker), deps(here)
    for path in sorted(set(theirs) | set(ours)):
        if theirs.get(path) != ours.get(path):
            return (f"{stage}: dependency {path} differs between the worker and here "
                    f"(md5 {theirs.get(path)} there, {ours.get(path)} here)")
    if (worker.get("params") or {}) != (here.get("params") or {}):
        return f"{stage}: its params differ between the worker and here"
    where = ("the DVC remote (see `dvc push --run-cache` in the worker's log)" if pull
             else "the shared DVC cache")
    return (f"{stage}: same dependencies and params as the worker's run, but the run cache here "
            f"had no entry for them: the worker's did not reach {where}")


def fan_in(root: Path, succeeded: Sequence[StageOutcome], cached: Sequence[str], partial: bool,
           pull: bool) -> int:
    """The main workspace's ``dvc repro``: restores the stages the workers ran (training stages
    and their evaluations) from the run cache (their dvc.lock entries dropped first,
    :func:`adopt_worker_results`) and the
    ``cached`` ones from the cache. After a failure, or for a selection (``--only``), only
    those are restored (``--single-item``), so a rerun finds just the rest stale. Returns 0 when
    no training stage was trained here."""
    cmd = ["repro", *(["--pull"] if pull else [])]
    ran = [s for o in succeeded for s in (o.stage, *o.also)]  # trained, then evaluated
    if partial:
        targets = [*ran, *cached]
        if not targets:
            return 0
        cmd += ["--single-item", *targets]
    order = lock_order(root)
    adopt_worker_results(root, ran)
    rc, output = dvc_here(root, cmd)
    keep_lock_order(root, order)
    if rc != 0:
        return rc
    trained = trained_here(output)
    if trained:
        from .workspace import lock_entry

        by_worker = {o.stage: o for o in succeeded}
        print(f"error: dvc repro trained {', '.join(trained)} here instead of restoring what the "
              "workers trained from the run cache:", file=sys.stderr)
        for stage in trained:
            why = (why_trained(stage, by_worker[stage].lock, lock_entry(root, stage), pull)
                   if stage in by_worker else f"{stage}: no worker ran it (its outputs were "
                   "in the cache, or it was up to date, when the grid asked `dvc status`)")
            print(f"  {why}", file=sys.stderr)
        return 3
    return 0


def dvc_here(root: Path, cmd: Sequence[str]) -> tuple[int, str]:
    """``dvc <cmd>`` in ``root``, its output shown as it comes; returns its exit status (a
    failure also said in one line) and output."""
    print(f"$ dvc {' '.join(cmd)}", flush=True)
    # Stage commands call `python`: this interpreter's, as in the workers.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen([sys.executable, "-m", "dvc", *cmd], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    rc = proc.wait()
    if rc != 0:
        print(f"error: dvc {' '.join(cmd)} failed (exit {rc})", file=sys.stderr)
    return rc, "".join(lines)


def trained_here(repro_output: str, groups: Sequence[str] = TRAINING_GROUPS) -> list[str]:
    """Training stages that a ``dvc repro`` output says it ran (not restored from the run cache)."""
    return training_stages(re.findall(r"Running stage '([^']+)'", repro_output), groups)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m ptsl.ops.grid",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=whole(1), default=None,
                    help="local Ray: runs at once (default: the CPU cores / --cpus-per-run)")
    ap.add_argument("--cpus-per-run", type=real(0), default=1.0,
                    help="Ray CPUs per run; also its torch threads (default 1)")
    ap.add_argument("--gpus-per-run", type=real(0, 1, inclusive=True), default=None,
                    help="Ray GPU fraction per run (default: the GPUs shared by as many runs as "
                         "the CPUs hold; 0 without GPUs)")
    ap.add_argument("--address", default=None,
                    help="join this Ray cluster (e.g. ray://head:10001 or auto); a DVC default "
                         "remote is then the shared cache")
    ap.add_argument("--connect-timeout", type=real(0), default=CONNECT_TIMEOUT_S,
                    metavar="SECONDS",
                    help="with --address: give up joining the cluster after this long "
                         "(default %(default)g)")
    ap.add_argument(SHARED_FLAG, action="store_true",
                    help="with --address: the DVC default remote is a folder every node mounts "
                         "at the same path (refused otherwise unless on a network filesystem)")
    ap.add_argument("--retries", type=whole(0), default=0,
                    help="Ray retries of a stage whose worker died (it resumes from its scratch "
                         "checkpoint; default 0: report it)")
    ap.add_argument("--only", action="append", default=[], metavar="PATTERN",
                    help="only the training stages matching this shell pattern (repeatable), "
                         "e.g. 'train@mt10_mtsac-*' or '*-2'; the fan-in then restores just "
                         "them and their evaluations, and the reports wait for a run without "
                         "--only")
    ap.add_argument("--dry", action="store_true", help="list the stale training stages and exit")
    ap.add_argument("--else-here", action="store_true",
                    help="where the workers cannot run what is checked out (uncommitted stage "
                         "inputs, or no git checkout), run `dvc repro` here instead, one stage "
                         "after another, saying why (`make repro` uses this)")
    ap.add_argument("--study", default=None,
                    help="run the stages of study studies/STUDY/ instead of the project's "
                         "(docs/studies.md)")
    ap.add_argument("--mps", action="store_true",
                    help="NVIDIA MPS (the Multi-Process Service) runs the CUDA kernels of the "
                         "runs sharing a GPU at once instead of in turns: start the grid's "
                         "nvidia-cuda-mps-control daemon, or reuse it, for the stages (local "
                         "Ray only; default --gpus-per-run as without it, at least 1/48)")
    args = ap.parse_args(argv)
    _check_flags(ap, args)
    return args


def _check_flags(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Flags that do not go together: a usage error through ``ap``."""
    if args.mps and args.address:
        ap.error("--mps: not with --address: MPS is per node; start nvidia-cuda-mps-control on "
                 "each node yourself")
    if args.remote_is_shared and not args.address:
        ap.error(f"{SHARED_FLAG}: only with --address (a local grid shares this machine's DVC "
                 "cache)")
    if args.mps and args.gpus_per_run == 0:
        ap.error("--mps: not with --gpus-per-run 0: MPS shares a GPU among runs")


def run(args: argparse.Namespace, root: Path) -> int:
    """The whole command; returns the exit status."""
    # Before anything else: a flag that cannot work here says so at once.
    mps = mps_daemon(root) if args.mps else None
    if not (root / "dvc.yaml").is_file():
        raise GridError(f"no dvc.yaml in {root}: run the grid from the project root")
    if args.address and not args.dry:
        check_cluster(root, args.address, args.remote_is_shared)
    # The workers run `dvc repro --single-item`, which skips the validate stage: check here what
    # it checks, before any worker removes an output.
    params = validate_project(root)
    fetch_study_runs(root)
    stages, cached = stale_training_stages(root)
    names = pipeline_stages(root) if stages or args.only else []
    if args.only:
        stages, cached = select_stages(args.only, stages, cached, training_stages(names))
    stages = seed_major(stages)
    if args.dry:
        print(f"{len(stages)} stale training stage(s)" + "".join(f"\n  {s}" for s in stages))
        if cached:
            print(f"{len(cached)} training stage(s) restored from the cache by the final "
                  f"dvc repro: {', '.join(cached)}")
        return 0
    pull = bool(args.address)
    outcomes: list[StageOutcome] = []
    if stages:
        why_not = workers_cannot_run(root)
        if why_not and args.else_here:
            print(f"grid: {why_not[0]}; running `dvc repro` here instead, one stage after "
                  "another", flush=True)
            only = ["--single-item", *stages, *cached] if args.only else []
            return dvc_here(root, ["repro", *(["--pull"] if pull else []), *only])[0]
        if why_not:
            raise GridError(", ".join(why_not))
        repo, folder = checkout(root)
        # Callbacks run last-in first-out: Ray (and the stage processes) stop before the daemon.
        with ExitStack() as stack:
            if mps:
                # Before Ray: a process that set up CUDA before the daemon ran never uses it.
                mps.start()
                stack.callback(stop_mps, mps)
            ray = _init_ray(args)
            stack.callback(ray.shutdown)
            # The experiments the workers write to, made here with the project's artifact
            # folder (one a worker made first would keep that worker's workspace as its artifact
            # root); after Ray has started, so that a cluster that never answers changes nothing.
            tracking = prepare_store(tuple(experiment_name(kind, root) for kind in
                                           ("train", "evaluate", "branches")), root)
            total = ray.cluster_resources()
            gpus = args.gpus_per_run
            if gpus is None:
                # With --mps too: it already puts as many runs on each GPU as the CPUs feed.
                gpus = default_gpus_per_run(total.get("CPU", 1), total.get("GPU", 0),
                                            args.cpus_per_run)
            if mps:
                gpus = mps_gpus_per_run(total.get("GPU", 0), gpus, args.gpus_per_run is not None)
            res = Resources(args.cpus_per_run, gpus)
            print(f"grid: {len(stages)} training stage(s) on Ray ({total.get('CPU', 0):g} CPUs, "
                  f"{total.get('GPU', 0):g} GPUs); per run {res.cpus:g} CPU, {res.gpus:g} GPU, "
                  f"{res.threads} torch thread(s)"
                  + (f"; up to {math.floor(1 / res.gpus)} run(s) per GPU under MPS" if mps
                     else ""), flush=True)
            common = {"repo": str(repo), "folder": folder, "commit": head_commit(root),
                      "cache": "" if pull else cache_dir(root),
                      "scratch": str((root / SCRATCH).resolve()), "remote": pull,
                      "env": _worker_env(res, tracking, mps)}
            jobs = [StageJob(stage=s, then=evaluation_of(s, names), **common) for s in stages]
            t0 = time.perf_counter()
            # The workers' task cache (PTSL_SCRATCH points them at this one's scratch folder).
            cache = task_cache_dir(Path(common["scratch"]))
            slots = math.floor(total.get("CPU", 1) / res.cpus)
            if res.gpus:
                slots = min(slots, math.floor(total.get("GPU", 0) / res.gpus))
            outcomes = fan_out(jobs, res, args.retries, ray, task_lists(stages, params), cache,
                               max(1, slots))
            print(f"grid: fan-out {len(jobs)} stage(s) in {time.perf_counter() - t0:.0f} s",
                  flush=True)
            if tracking:
                close_orphaned_runs(tracking, [o.stage for o in outcomes if not o.ok], root)
    failed = [o for o in outcomes if not o.ok]
    rc = fan_in(root, [o for o in outcomes if o.ok], cached, bool(failed or args.only), pull)
    if failed:
        print(f"error: {len(failed)} training stage(s) failed: "
              + "; ".join(f"{o.stage} (log: {o.log})" for o in failed), file=sys.stderr)
        print("run `python -m ptsl.ops.grid` again to run only what is still stale",
              file=sys.stderr)
        return 1
    return rc


def workers_cannot_run(root: Path) -> tuple[str, str] | None:
    """Why the workers (which clone the commit) would not run what is checked out at ``root``,
    and the remedy; None when they would."""
    try:
        dirty = uncommitted_inputs(root)
    except WorkspaceError as exc:
        return (f"no git checkout for the workers to clone ({exc})",
                "run `dvc repro` or `make repro` here")
    if dirty:
        return (f"uncommitted changes in {', '.join(dirty[:5])}{' ...' if len(dirty) > 5 else ''}"
                ": workers run the commit (git clone)", "so commit or stash them first")
    return None


def pipeline_folder(root: Path, study: str | None) -> Path:
    """The folder whose dvc.yaml the grid runs: the project's, or study ``study``'s."""
    if study is None:
        return root
    known = [p.name for p in study_dirs(root)]
    if study not in known:
        raise GridError(f"--study: unknown study {study!r}; allowed: {', '.join(known) or 'none'}"
                        f" (folders under {root / STUDIES} with a params.yaml)")
    return root / STUDIES / study


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args, pipeline_folder(Path.cwd().resolve(), args.study))
    except (GridError, ClusterError, WorkspaceError, MpsError, *USER_ERRORS) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
