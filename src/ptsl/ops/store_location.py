"""Where the project's MLflow store is (:func:`tracking_uri`), and a copied or moved checkout's
store pointed at the checkout's own ``mlartifacts/`` (:func:`relocate`).

The store's address lives here, below both :mod:`ptsl.ops.tracking` (which writes runs) and
:mod:`ptsl.ops.mlflow_ui` (which reads them and whose experiment tags the tracker sets), so that
neither imports the other back.

MLflow records absolute artifact locations: each experiment's, and each run's (its experiment's
location and the run id, fixed when the run is created). A store copied with its checkout
(``cp -r``) or moved would go on writing new artifacts into the old folder, and its runs would
read their files there. MLflow reads both locations through its client, which this module uses,
but has no call that changes either (MLflow 3.17: not the client, not the tracking store). So
they are written through MLflow's own table models (``mlflow.store.tracking.dbmodels``) in one
transaction of MLflow's SQL store, after checking that the store's tables and MLflow's models
hold every column this relies on (:data:`RELIES_ON`). When one is missing (a store another MLflow
release created or migrated), nothing is written and one line names the table, the column, the
MLflow version and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .study import shared_root

#: The MLflow release this module was checked against (the pin of requirements.txt).
CHECKED_MLFLOW = "3.17.2"
#: The tables and columns the rewrite relies on: MLflow offers no API for them.
RELIES_ON = {"experiments": ("experiment_id", "artifact_location"),
             "runs": ("run_uuid", "artifact_uri")}
ARTIFACTS = "mlartifacts"


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
    return shared_root(path)  # a study's stages share the project's store


def tracking_uri(root: Path | None = None) -> str:
    """``MLFLOW_TRACKING_URI`` when set (a server), else the SQLite file ``mlflow.db`` at the
    project root of ``root`` (default: the working directory)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{project_root(root) / 'mlflow.db'}"


class StoreSchemaError(RuntimeError):
    """The store's schema is not the one the rewrite relies on; the message is one line."""


def schema_difference(engine: Any) -> str | None:
    """What differs, in a few words, between what the rewrite relies on and the store behind
    ``engine`` (its tables, read by SQLAlchemy's inspector) or the installed MLflow's models of
    them; None when nothing does."""
    import sqlalchemy
    from mlflow.store.tracking.dbmodels.models import SqlExperiment, SqlRun

    models = {"experiments": SqlExperiment, "runs": SqlRun}
    inspector = sqlalchemy.inspect(engine)
    tables = set(inspector.get_table_names())
    for table, columns in RELIES_ON.items():
        model = models[table]
        if model.__tablename__ != table:
            return f"MLflow's model {model.__name__} maps table {model.__tablename__}, not {table}"
        if table not in tables:
            return f"the store has no table {table}"
        in_store = {c["name"] for c in inspector.get_columns(table)}
        for column in columns:
            if column not in in_store:
                return f"table {table} has no column {column}"
            if column not in model.__table__.columns:
                return f"MLflow's model of table {table} has no column {column}"
    return None


def _old_prefixes(client: Any, new: str) -> set[str]:
    """``<old root>/mlartifacts/`` of every experiment (deleted ones too) whose location is
    under another checkout's artifact folder, read through MLflow's client."""
    from mlflow.entities import ViewType

    olds, token = set(), None
    marker = f"/{ARTIFACTS}/"
    while True:
        page = client.search_experiments(view_type=ViewType.ALL, max_results=1000,
                                         page_token=token)
        for exp in page:
            loc = exp.artifact_location or ""
            if marker in loc and not loc.startswith(new):
                olds.add(loc[: loc.index(marker) + len(marker)])
        token = page.token
        if not token:
            return olds


def _rewrite(store: Any, olds: set[str], new: str) -> None:
    """Locations under each of ``olds`` -> the same path under ``new``, experiments and runs,
    in one transaction through MLflow's models."""
    from mlflow.store.tracking.dbmodels.models import SqlExperiment, SqlRun
    from sqlalchemy import func

    with store.ManagedSessionMaker(read_only=False) as session:
        for old in olds:
            n = len(old)
            for model, column in ((SqlExperiment, "artifact_location"), (SqlRun, "artifact_uri")):
                attr = getattr(model, column)
                for row in session.query(model).filter(func.substr(attr, 1, n) == old):
                    setattr(row, column, new + getattr(row, column)[n:])


def relocate(uri: str, db: Path, root: Path) -> str | None:
    """Point the SQLite store ``db`` (tracking URI ``uri``) at ``<root>/mlartifacts/`` when it
    points at another folder's; returns the old root then (None when nothing was moved). A
    :class:`StoreSchemaError` when the store's schema is not the one the rewrite relies on."""
    import mlflow
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking import MlflowClient

    new = (root / ARTIFACTS).as_uri() + "/"
    olds = _old_prefixes(MlflowClient(tracking_uri=uri), new)
    if not olds:
        return None
    old_root = sorted(olds)[0][: -len(f"/{ARTIFACTS}/")]
    store = SqlAlchemyStore(uri, default_artifact_root=new)
    differs = schema_difference(store.engine)
    if differs is not None:
        raise StoreSchemaError(
            f"{db}: the checkout was copied or moved (artifact locations point at {old_root}) "
            f"but {differs}, unlike the schema of mlflow=={CHECKED_MLFLOW} that the move relies "
            f"on (MLflow {mlflow.__version__} is installed); nothing was changed: install the "
            f"pinned MLflow (make install), or move {db.name} aside to start a new store, or "
            "train untracked with PTSL_TRACKING=off")
    _rewrite(store, olds, new)
    return old_root
