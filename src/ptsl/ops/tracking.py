"""MLflow tracking: store location, run naming, tags, batched metrics and artifacts.

The default store is SQLite at an absolute path in the project root (``mlflow.db``);
``MLFLOW_TRACKING_URI`` points elsewhere (a server). ``PTSL_TRACKING=off`` turns tracking off:
then :func:`start_run` returns a tracker whose calls do nothing.

Outage policy: a store that cannot be used when a stage starts (server unreachable, SQLite file
locked or corrupt) stops the stage before any work, in one line (:class:`TrackingError`). A
store that fails later, mid-training, does not throw away hours of work: the first failure prints
one warning line, later tracking calls are skipped, and the stage's outputs (curve.csv,
summary.json) still hold every result.

Kills: a stage killed without a chance to end its run (SIGKILL, power loss) leaves it RUNNING;
the next attempt of the same stage marks it KILLED, renames it ``<name> (killed)`` and links the
new run to it (tags ``ptsl.previous_run`` / ``ptsl.resumed_by``). A resumed training run re-logs
the curve it resumed with, so the new run holds the whole curve. Ctrl-C and SIGTERM wait until
the store call under way has finished (:func:`signals_held`): an interrupt inside an SQLite write
would leave its transaction open and the store locked, so the run could not be marked KILLED.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

from .mlflow_ui import experiment_tags
from .store_location import project_root, tracking_uri
from .study import study_of

TRACKING_ENV = "PTSL_TRACKING"
_BATCH = 1000  # MLflow accepts at most 1,000 metrics per log_batch call
_PROBE_TIMEOUT_S = 5.0
_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def signals_held():
    """Ctrl-C and SIGTERM arriving inside the block are noted and raised again when it ends, to
    the handlers in place before it. In the main thread only (where Python runs handlers)."""
    if (threading.current_thread() is not threading.main_thread()
            or any(signal.getsignal(s) is None for s in _INTERRUPTS)):  # a handler not from Python
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
                for s in _INTERRUPTS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])


class TrackingError(RuntimeError):
    """The tracking store cannot be used; the message says which store and what to do."""


def tracking_enabled() -> bool:
    return os.environ.get(TRACKING_ENV, "on").lower() not in ("off", "0", "false", "no")


def experiment_name(kind: str, start: Path | None = None) -> str:
    """The MLflow experiment of a stage kind (``train``, ``evaluate`` ...): ``<study>/<kind>``
    for a stage run in a study folder, so that a study's runs never mix with the default
    pipeline's of the same name."""
    found = study_of(start or Path.cwd())
    return f"{found[1]}/{kind}" if found else kind


def git_commit(root: Path | None = None) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or Path.cwd(),
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


class Tracker:
    """One MLflow run, and the training loop's :class:`ptsl.core.log.RunLog` (the curve under
    ``eval/``, the loss means under ``train/``). Metrics are buffered and sent in batches (one
    call per value is ~50x slower on these machines); :meth:`flush` sends them (the training
    loop flushes at every evaluation, so a killed run keeps its curve up to its last
    evaluation). Used as a context manager, it ends the run when the block ends.

    A failure of the store after the run started is reported once as a warning and tracking is
    skipped from then on (the module docstring gives the policy)."""

    def __init__(self, client: Any, run_id: str, previous_run_id: str | None = None) -> None:
        self._client = client
        self.run_id = run_id
        self.previous_run_id = previous_run_id  # a killed attempt of the same stage, if any
        self._pending: list[Any] = []
        self.failed: str | None = None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.failed is not None:
            return None
        try:
            with signals_held():
                return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any store failure: warn once, keep training
            self.failed = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            print(f"warning: MLflow tracking failed ({self.failed}); training goes on without "
                  "tracking, its outputs hold the results", file=sys.stderr)
            return None

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):
            self._call(self._client.log_batch, self.run_id, params=items[i:i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        self._pending.extend(Metric(k, float(v), ts, int(step)) for k, v in metrics.items())
        if len(self._pending) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        while self._pending:
            chunk, self._pending = self._pending[:_BATCH], self._pending[_BATCH:]
            self._call(self._client.log_batch, self.run_id, metrics=chunk)

    def log_artifact(self, path: str | Path) -> None:
        self._call(self._client.log_artifact, self.run_id, str(path))

    def log_artifacts(self, folder: str | Path, artifact_path: str) -> None:
        """Every file of ``folder`` under ``artifact_path`` in the run's artifacts."""
        self._call(self._client.log_artifacts, self.run_id, str(folder), artifact_path)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        for k, v in tags.items():
            self._call(self._client.set_tag, self.run_id, k, str(v))

    # The training loop's RunLog (ptsl.core.log): an evaluation's curve row under eval/ (its
    # windowed training-success columns stay in the curve file: the episodes themselves are
    # logged one by one), the loss means and each training episode's success under train/.
    def evaluation(self, step: int, row: Mapping[str, float]) -> None:
        self.log_metrics({f"eval/{k}": v for k, v in row.items()
                          if k != "step" and not k.startswith("train_")}, step)

    def losses(self, step: int, means: Mapping[str, float]) -> None:
        self.log_metrics({f"train/{k}": v for k, v in means.items()}, step)

    def training_episode(self, step: int, success: Mapping[str, float]) -> None:
        mean = sum(success.values()) / len(success)
        self.log_metrics({"train/success": mean,
                          **{f"train/success/{task}": v for task, v in success.items()}}, step)

    def resumed(self, step: int, curve: Sequence[Mapping[str, float]],
                from_run: str | None) -> None:
        """A run resumed at ``step`` from a checkpoint written under MLflow run ``from_run``:
        link the two runs, re-log the evaluation curve the checkpoint carries and copy
        ``from_run``'s training metrics up to ``step``, so that this run holds the whole curve."""
        self.set_tags({"ptsl.resumed_at_step": str(step)})
        for row in curve:
            self.evaluation(int(row["step"]), row)
        old = self._call(self._client.get_run, from_run) if from_run else None
        if old is not None and from_run != self.run_id:
            if old.info.status == "RUNNING":
                self._call(_mark_killed, self._client, old)
            self.previous_run_id = from_run
            self.set_tags({"ptsl.previous_run": from_run})
            self._call(self._client.set_tag, from_run, "ptsl.resumed_by", self.run_id)
            for key in [k for k in old.data.metrics if k.startswith("train/")]:
                history = self._call(self._client.get_metric_history, from_run, key) or []
                self._pending.extend(m for m in history if m.step <= step)
        self.flush()

    def end(self, status: str = "FINISHED") -> None:
        self.flush()
        self._call(self._client.set_terminated, self.run_id, status=status)

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: Any) -> None:
        """Leaving a ``with`` block ends the run: FINISHED, KILLED on Ctrl-C or SIGTERM (which
        :func:`ptsl.ops.stage.run_stage` turns into KeyboardInterrupt), FAILED on an error."""
        self.end("FINISHED" if kind is None else
                 "KILLED" if issubclass(kind, KeyboardInterrupt) else "FAILED")


class NullTracker(Tracker):
    """Tracking switched off (``PTSL_TRACKING=off``): every call does nothing."""

    def __init__(self) -> None:
        self.run_id = ""
        self.previous_run_id = None
        self._pending = []
        self.failed = None

    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def flush(self) -> None: ...
    def log_artifact(self, path: str | Path) -> None: ...
    def log_artifacts(self, folder: str | Path, artifact_path: str) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def evaluation(self, step: int, row: Mapping[str, float]) -> None: ...
    def losses(self, step: int, means: Mapping[str, float]) -> None: ...
    def training_episode(self, step: int, success: Mapping[str, float]) -> None: ...
    def resumed(self, step: int, curve: Sequence[Mapping[str, float]],
                from_run: str | None) -> None: ...
    def end(self, status: str = "FINISHED") -> None: ...


def dvc_experiment() -> str:
    """The DVC experiment a stage runs under (``DVC_EXP_NAME``, set by ``dvc exp run``), or
    ``workspace`` for a plain ``dvc repro`` or a direct call."""
    return os.environ.get("DVC_EXP_NAME") or "workspace"


def display_name(run_name: str) -> str:
    """``mt10_care_ptsl-1``, or ``mt10_care_ptsl-1 [exp-name]`` under ``dvc exp run`` so that
    an ablation's runs read apart from the baseline's in the runs list."""
    exp = os.environ.get("DVC_EXP_NAME")
    return f"{run_name} [{exp}]" if exp else run_name


def _store_path(uri: str) -> Path | None:
    """The SQLite file of a ``sqlite:///`` URI (None for a server or another backend)."""
    prefix = "sqlite:///"
    return Path(uri[len(prefix):]) if uri.startswith(prefix) else None


def relocate_store(db: Path, root: Path) -> str | None:
    """Point a copied or moved project store at this checkout's ``mlartifacts/``
    (:mod:`ptsl.ops.store_location`: through MLflow's client and table models, after a check of
    the store's schema), saying so in one line. Returns the old root when something was
    rewritten; a :class:`TrackingError` (one line, nothing written) when the store's schema is
    not the one the rewrite relies on."""
    from .store_location import StoreSchemaError, relocate

    if not db.is_file():
        return None
    try:
        old_root = relocate(f"sqlite:///{db}", db, root)
    except StoreSchemaError as exc:
        raise TrackingError(str(exc)) from None
    if old_root is not None:
        print(f"{db.name}: artifact locations moved from {old_root} to {root.as_uri()} "
              "(the checkout was copied or moved)")
    return old_root


def _experiment_id(client: Any, experiment: str, root: Path) -> str:
    """The experiment's id, created with the project's artifact folder and tags if missing."""
    exp = client.get_experiment_by_name(experiment)
    wanted = experiment_tags(experiment)
    if exp is None:
        # A fixed artifact location in the project root (not the cwd, which a queued DVC
        # experiment makes a temp copy).
        location = (root / "mlartifacts" / experiment).as_uri()
        return client.create_experiment(experiment, artifact_location=location, tags=wanted)
    for key, value in wanted.items():  # stores created before these tags existed
        if exp.tags.get(key) != value:
            client.set_experiment_tag(exp.experiment_id, key, value)
    return exp.experiment_id


def prepare_store(experiments: tuple[str, ...], root: Path | None = None) -> str | None:
    """Create the store (tables, migrations) and ``experiments`` once, before parallel writers
    start: processes creating a fresh SQLite store at the same time race. Returns the tracking
    URI the writers must use (``None`` when tracking is off)."""
    if not tracking_enabled():
        return None
    from mlflow.tracking import MlflowClient

    root = project_root(root)
    uri = tracking_uri(root)
    client = MlflowClient(tracking_uri=uri)
    for name in experiments:
        _experiment_id(client, name, root)
    return uri


def _probe_server(uri: str) -> None:
    """Fail fast, in one line, when a tracking server does not answer (instead of MLflow's
    minutes of retries)."""
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT_S) as resp:  # noqa: S310 - user's URI
            resp.read(64)
    except (urllib.error.URLError, OSError, socket.timeout) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(
            f"MLFLOW_TRACKING_URI={uri}: MLflow server not reachable ({reason}); start it, "
            f"point MLFLOW_TRACKING_URI at a running one, or unset it to use the project's "
            f"mlflow.db (PTSL_TRACKING=off trains without tracking)") from None


def _store_error(uri: str, exc: Exception) -> TrackingError:
    """One line for a store that cannot be opened (locked, corrupt, wrong schema)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    db = _store_path(uri)
    where = str(db) if db is not None else uri
    if "locked" in text:
        what = "is locked by another process (wait for it, or end it)"
    elif db is not None:
        what = (f"is not a readable MLflow store ({text[:160]}); move it aside to start a new "
                "store, or set MLFLOW_TRACKING_URI")
    else:
        what = f"refused the request ({text[:160]})"
    return TrackingError(f"{where}: MLflow tracking store {what}")


def _alive_here(run: Any) -> bool:
    """Whether a RUNNING run's process still runs on this host (then it is not an orphan)."""
    tags = run.data.tags
    if tags.get("host") != socket.gethostname() or not tags.get("ptsl.pid", "").isdigit():
        return False
    try:
        os.kill(int(tags["ptsl.pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return int(tags["ptsl.pid"]) != os.getpid()


def close_orphans(client: Any, exp_id: str, stage: str) -> str | None:
    """Mark runs of ``stage`` left RUNNING by a killed attempt as KILLED and rename them
    ``<name> (killed)``; returns the newest one's id. A run whose process still runs on this
    host is left alone."""
    query = (f"tags.dvc_stage = '{stage}' and tags.dvc_experiment = '{dvc_experiment()}' "
             "and attributes.status = 'RUNNING'")
    newest = None
    for run in client.search_runs([exp_id], query, order_by=["attributes.start_time DESC"]):
        if _alive_here(run):
            continue
        _mark_killed(client, run)
        newest = newest or run.info.run_id
    return newest


def _mark_killed(client: Any, run: Any) -> None:
    client.set_terminated(run.info.run_id, status="KILLED")
    if not run.info.run_name.endswith(" (killed)"):
        client.update_run(run.info.run_id, name=f"{run.info.run_name} (killed)")


def start_run(experiment: str, run_name: str, stage: str, root: Path | None = None,
              tags: Mapping[str, str] | None = None) -> Tracker:
    """Open an MLflow run named ``run_name`` in MLflow experiment ``experiment``.

    Tags link the run to what produced it: the DVC stage (also shown as the run's Source), the
    DVC experiment (``workspace`` outside ``dvc exp run``) and the git commit. A run of the same
    stage left RUNNING by a killed attempt is marked KILLED and linked to the new one. A store
    that cannot be used raises :class:`TrackingError` (one line) before anything else happens.
    """
    if not tracking_enabled():
        return NullTracker()
    from mlflow.tracking import MlflowClient

    start, root = root, project_root(root)  # a study's folder names its experiments
    uri = tracking_uri(root)
    if uri.startswith(("http://", "https://")):
        _probe_server(uri)
    db = _store_path(uri)
    commit = git_commit(root)
    all_tags = {"mlflow.runName": display_name(run_name), "dvc_stage": stage,
                "dvc_experiment": dvc_experiment(), "git_commit": commit,
                "mlflow.source.name": stage, "mlflow.source.type": "PROJECT",
                "host": socket.gethostname(), "ptsl.pid": str(os.getpid())}
    if commit != "unknown":
        all_tags["mlflow.source.git.commit"] = commit
    all_tags["mlflow.note.content"] = (  # the run page's description
        f"DVC stage `{stage}`, DVC experiment `{dvc_experiment()}`, git commit `{commit[:10]}`.")
    all_tags.update(tags or {})
    try:
        if db is not None and db.parent == root:
            relocate_store(db, root)
        client = MlflowClient(tracking_uri=uri)
        exp_id = _experiment_id(client, experiment_name(experiment, start), root)
        previous = close_orphans(client, exp_id, stage)
        if previous:
            all_tags["ptsl.previous_run"] = previous
        run = client.create_run(exp_id, run_name=display_name(run_name), tags=all_tags)
        if previous:
            client.set_tag(previous, "ptsl.resumed_by", run.info.run_id)
    except TrackingError:
        raise
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy, sqlite3 and MLflow errors alike
        raise _store_error(uri, exc) from None
    return Tracker(client, run.info.run_id, previous)
