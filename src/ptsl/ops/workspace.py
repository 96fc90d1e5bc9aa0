"""Grid worker workspaces: a clone of the project at one commit and one DVC stage run in it
(``dvc repro --single-item``), logged to a file.

This module runs on the worker's machine and knows nothing of Ray; :mod:`ptsl.ops.grid` schedules it.
On one machine the workspace uses the project's DVC cache, so the stage's outputs and run-cache
entry land where the main workspace's ``dvc repro`` finds them. On a cluster (``remote``) the
workspace keeps its own cache: it pulls from the default DVC remote first (a stage already there
is restored, not trained) and pushes its outputs and run cache there afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

# What a worker's stages (and its DVC) read besides DVC outputs; a workspace is a clone of the
# commit, so uncommitted edits here would silently not reach the workers.
STAGE_INPUTS = ("dvc.yaml", "params.yaml", "requirements.txt", "requirements", "pipeline", "src",
                "data", ".dvc/config")


class WorkspaceError(RuntimeError):
    """The project cannot be fanned out as it is; the message says what to do."""


@dataclass(frozen=True)
class StageJob:
    """One stage to run in its own workspace on whichever machine picks it up.

    Paths are absolute and must exist on that machine: on one box they are the main project's; on
    a cluster every node has a checkout of the project at the same path.
    """

    stage: str                  # DVC stage name, e.g. train@mt10_care-1
    repo: str                   # the project checkout the workspace is cloned from
    folder: str                 # the pipeline's folder in it: "" or studies/<name>
    commit: str                 # the commit every workspace checks out
    cache: str                  # the DVC cache dir the workspace uses; "" with remote
    scratch: str                # PTSL_SCRATCH: resume checkpoints and task cache, shared
    remote: bool = False        # pull from / push to the default DVC remote (a cluster)
    env: Mapping[str, str] = field(default_factory=dict)  # MLFLOW_TRACKING_URI, PTSL_THREADS...
    # Stages run after it in the same workspace once it succeeded (its evaluation), so that
    # they fan out too instead of waiting for the main workspace's `dvc repro`.
    then: tuple[str, ...] = ()

    @property
    def workspace(self) -> Path:
        return Path(self.scratch) / "grid" / "workspaces" / self.stage

    @property
    def log(self) -> Path:
        return Path(self.scratch) / "grid" / "logs" / f"{self.stage}.log"


@dataclass(frozen=True)
class StageOutcome:
    """How a stage ended: ``returncode`` 0 means its outputs are in the shared cache."""

    stage: str
    returncode: int
    log: str
    host: str
    seconds: float
    message: str = ""           # one line on failure
    # The stage's dvc.lock entry as the worker's DVC wrote it (deps, params, outs): what the
    # head compares with its own if it trains the stage again (:func:`ptsl.ops.grid.why_trained`).
    lock: Mapping[str, Any] | None = None
    # Of ``StageJob.then``, the stages that also ran here (their outputs in the cache too).
    also: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} in {cwd} failed: "
                             f"{''.join((proc.stderr or proc.stdout).strip().splitlines()[-1:])}")
    return proc.stdout


def head_commit(root: Path) -> str:
    """The commit the main workspace is at."""
    return _git(root, "rev-parse", "HEAD").strip()


def checkout(root: Path) -> tuple[Path, str]:
    """The checkout that holds the pipeline folder ``root`` and the folder inside it: ``""`` for
    the project's pipeline, ``studies/<name>`` for a study's."""
    top = Path(_git(root, "rev-parse", "--show-toplevel").strip()).resolve()
    here = Path(root).resolve()
    return top, "" if here == top else here.relative_to(top).as_posix()


def uncommitted_inputs(root: Path) -> list[str]:
    """Files under :data:`STAGE_INPUTS` of the checkout, and of the pipeline folder ``root`` in
    it (a study's), that differ from the commit (modified, staged, untracked and not ignored).
    DVC's own ``.gitignore`` files for outputs do not count."""
    repo, folder = checkout(root)
    inputs = [*STAGE_INPUTS, *(f"{folder}/{p}" for p in STAGE_INPUTS if folder)]
    out = _git(repo, "status", "--porcelain", "--untracked-files=all", "--", *inputs)
    paths = [line[3:].split(" -> ")[-1].strip('"') for line in out.splitlines() if line.strip()]
    return [p for p in paths if Path(p).name != ".gitignore"]


def make_workspace(job: StageJob) -> Path:
    """A fresh clone of ``job.repo`` at ``job.commit``."""
    ws = job.workspace
    if ws.exists():
        shutil.rmtree(ws)
    ws.parent.mkdir(parents=True, exist_ok=True)
    # --shared borrows the checkout's object store: no copy of the history per workspace.
    _git(ws.parent, "clone", "--quiet", "--shared", "--no-checkout", job.repo, str(ws))
    try:
        _git(ws, "checkout", "--quiet", "--detach", job.commit)
    except WorkspaceError as exc:
        raise WorkspaceError(f"commit {job.commit[:12]} is not in {job.repo} on "
                             f"{socket.gethostname()}: fetch it there ({exc})") from exc
    local = Path(job.repo) / ".dvc" / "config.local"  # remotes and their credentials
    if local.is_file():
        shutil.copy2(local, ws / ".dvc" / "config.local")
    return ws


def _stage_env(job: StageJob, ws: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(job.env)
    # The stage's `python` and `dvc` are this interpreter's; its `import ptsl` is the workspace's
    # source (ahead of an editable install of the main checkout), so the commit is what runs.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ws / 'src'}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
    env["PTSL_SCRATCH"] = job.scratch
    return env


def _run_logged(cmd: list[str], cwd: Path, env: Mapping[str, str], log) -> int:
    """Run ``cmd`` with output to ``log``. It stays in this process's group so that Ray, when it
    kills a worker, takes the stage down with it; if this process is interrupted (a cancelled
    task) the command and everything under it, the training process included, are stopped."""
    import psutil

    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
    try:
        rc = proc.wait()
        log.write(f"grid: exit status {rc} after {time.perf_counter() - t0:.1f} s\n")
        return rc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess):  # it may end meanwhile
                root = psutil.Process(proc.pid)
                tree = [root, *root.children(recursive=True)]
                for p in tree:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        p.terminate()
                psutil.wait_procs(tree, timeout=10)


def share_cache(ws: Path, cache: str) -> None:
    """Point the workspace's DVC at the main workspace's cache (``dvc cache dir --local``,
    written through DVC's config API without starting a DVC process)."""
    from dvc.config import Config

    with Config(dvc_dir=str(ws / ".dvc")).edit("local") as conf:
        conf["cache"]["dir"] = cache


def _up_to_date(dvc: list[str], here: Path, env: Mapping[str, str], stage: str, log) -> bool:
    """Whether ``stage`` stands in dvc.lock with its outputs (``dvc status`` says nothing)."""
    proc = subprocess.run([*dvc, "status", "--json", stage], cwd=here, env=dict(env),
                          capture_output=True, text=True)
    log.write(f"$ dvc status --json {stage}\n{proc.stdout}{proc.stderr}")
    try:
        return proc.returncode == 0 and not json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        return False


def run_job(job: StageJob) -> StageOutcome:
    """Run ``job.stage`` in a fresh workspace; its log is ``job.log``. The workspace is removed
    when the stage succeeds and kept for inspection when it fails."""
    t0 = time.time()
    host = socket.gethostname()
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with open(job.log, "w") as log:
        log.write(f"grid: {job.stage} at {job.commit[:12]} on {host}\n")
        try:
            ws = make_workspace(job)
            log.write(f"grid: workspace cloned in {time.time() - t0:.1f} s\n")
            here = ws / job.folder  # the pipeline's folder: the stage runs where its dvc.yaml is
            dvc = [sys.executable, "-m", "dvc"]
            env = _stage_env(job, ws)
            if job.cache:
                share_cache(ws, job.cache)
            pull = ["--pull"] if job.remote else []
            # One DVC process for the stage and its followers, in this order; DVC stops at the
            # first that fails.
            rc = _run_logged([*dvc, "repro", *pull, "--single-item", job.stage, *job.then],
                             here, env, log)
            also = list(job.then) if rc == 0 else []
            if rc != 0 and job.then and _up_to_date(dvc, here, env, job.stage, log):
                # The training stage's outputs stand; the main workspace's `dvc repro` runs
                # what failed after it again and reports its error there.
                log.write(f"grid: {', '.join(job.then)} failed in the worker; the fan-in "
                          "runs it\n")
                rc = 0
            if rc == 0 and job.remote:
                rc = _run_logged([*dvc, "push", "--run-cache", job.stage, *also], here, env,
                                 log)
        except WorkspaceError as exc:
            log.write(f"error: {exc}\n")
            return StageOutcome(job.stage, 1, str(job.log), host, time.time() - t0, str(exc))
    if rc == 0:
        lock = lock_entry(ws / job.folder, job.stage)
        shutil.rmtree(ws, ignore_errors=True)
        return StageOutcome(job.stage, 0, str(job.log), host, time.time() - t0, lock=lock,
                            also=tuple(also))
    return StageOutcome(job.stage, rc, str(job.log), host, time.time() - t0,
                        _last_error(job.log) or f"exit status {rc}")


def lock_stages(root: Path) -> dict[str, Any]:
    """The stage entries of ``root``'s dvc.lock, in its order (empty without one)."""
    import yaml

    path = Path(root) / "dvc.lock"
    if not path.is_file():
        return {}
    return (yaml.safe_load(path.read_text()) or {}).get("stages") or {}


def lock_entry(root: Path, stage: str) -> dict[str, Any] | None:
    """``stage``'s entry in ``root``'s dvc.lock, or None when there is none."""
    return lock_stages(root).get(stage)


def _last_error(log: Path) -> str:
    """The log's last ``error:`` line (the stage scripts' and DVC's one-line reasons)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines()]
    errors = [ln for ln in lines if ln.startswith(("error:", "ERROR:"))]
    return errors[-1] if errors else ""
