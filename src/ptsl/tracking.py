"""MLflow tracking: store location, run naming, tags, batched metrics and artifacts.

The default store is SQLite at an absolute path in the project root (``mlflow.db``);
``MLFLOW_TRACKING_URI`` points elsewhere (a server). ``PTSL_TRACKING=off`` turns tracking off:
then :func:`start_run` returns a tracker whose calls do nothing.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping

TRACKING_ENV = "PTSL_TRACKING"
_BATCH = 1000  # MLflow accepts at most 1,000 metrics per log_batch call


def tracking_enabled() -> bool:
    return os.environ.get(TRACKING_ENV, "on").lower() not in ("off", "0", "false", "no")


def project_root(start: Path | None = None) -> Path:
    """The project root, also from inside a ``dvc exp run --queue`` temp copy.

    Queued experiments run in ``<root>/.dvc/tmp/exps/...``; a store resolved there would vanish
    with the copy, so such paths are mapped back to the real root.
    """
    path = (start or Path.cwd()).resolve()
    parts = path.parts
    for i in range(len(parts) - 2):
        if parts[i:i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return path


def tracking_uri(root: Path | None = None) -> str:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{project_root(root) / 'mlflow.db'}"


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
    """One MLflow run. Metrics are buffered and sent in batches (one call per value is ~50x
    slower on these machines)."""

    def __init__(self, client: Any, run_id: str) -> None:
        self._client = client
        self.run_id = run_id
        self._pending: list[Any] = []

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):
            self._client.log_batch(self.run_id, params=items[i:i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        self._pending.extend(Metric(k, float(v), ts, int(step)) for k, v in metrics.items())
        if len(self._pending) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        while self._pending:
            chunk, self._pending = self._pending[:_BATCH], self._pending[_BATCH:]
            self._client.log_batch(self.run_id, metrics=chunk)

    def log_artifact(self, path: str | Path) -> None:
        self._client.log_artifact(self.run_id, str(path))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        for k, v in tags.items():
            self._client.set_tag(self.run_id, k, str(v))

    def end(self, status: str = "FINISHED") -> None:
        self.flush()
        self._client.set_terminated(self.run_id, status=status)


class NullTracker(Tracker):
    """Tracking switched off (``PTSL_TRACKING=off``): every call does nothing."""

    def __init__(self) -> None:
        self.run_id = ""
        self._pending = []

    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def flush(self) -> None: ...
    def log_artifact(self, path: str | Path) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def end(self, status: str = "FINISHED") -> None: ...


def _experiment_id(client: Any, experiment: str, root: Path) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return exp.experiment_id
    # A fixed artifact location in the project root (not the cwd, which a queued DVC
    # experiment makes a temp copy).
    location = (root / "mlartifacts" / experiment).as_uri()
    return client.create_experiment(experiment, artifact_location=location)


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


def start_run(experiment: str, run_name: str, stage: str, root: Path | None = None,
              tags: Mapping[str, str] | None = None) -> Tracker:
    """Open an MLflow run named ``run_name`` in MLflow experiment ``experiment``.

    Tags record the git commit and the DVC stage that produced the run.
    """
    if not tracking_enabled():
        return NullTracker()
    from mlflow.tracking import MlflowClient

    root = project_root(root)
    client = MlflowClient(tracking_uri=tracking_uri(root))
    exp_id = _experiment_id(client, experiment, root)
    all_tags = {"mlflow.runName": run_name, "git_commit": git_commit(root), "dvc_stage": stage}
    all_tags.update(tags or {})
    run = client.create_run(exp_id, run_name=run_name, tags=all_tags)
    return Tracker(client, run.info.run_id)
