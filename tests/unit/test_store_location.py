"""A moved checkout's MLflow store follows it, through the pinned MLflow's own client and table
models; a store whose schema differs from the one the move relies on gets one line and is left
as it was. Real MLflow stores (SQLite) in temp folders."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from ptsl.ops import tracking
from ptsl.ops.store_location import CHECKED_MLFLOW

from ..conftest import ROOT
from ..helpers import log_file, mlflow_client


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_checked_mlflow_is_the_pinned_and_installed_one():
    import mlflow

    assert f"mlflow=={CHECKED_MLFLOW}" in (ROOT / "requirements.txt").read_text().split()
    assert mlflow.__version__ == CHECKED_MLFLOW


def test_a_moved_store_follows_its_checkout(tmp_path, tracking_on, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    old_run = log_file(old, "a-1", "before the move")
    shutil.move(old, new)

    assert tracking.relocate_store(new / "mlflow.db", new) == old.as_uri()
    assert capsys.readouterr().out == (f"mlflow.db: artifact locations moved from {old.as_uri()} "
                                       f"to {new.as_uri()} (the checkout was copied or moved)\n")
    client = mlflow_client(new)
    assert client.get_experiment_by_name("train").artifact_location == \
        (new / "mlartifacts" / "train").as_uri()
    assert client.get_run(old_run).info.artifact_uri == \
        (new / "mlartifacts" / "train" / old_run / "artifacts").as_uri()
    assert [a.path for a in client.list_artifacts(old_run)] == ["note.txt"]

    # A run logged after the move lands its artifacts under the new root, and nothing is
    # written where the checkout used to be.
    new_run = log_file(new, "a-2", "after the move")
    assert (new / "mlartifacts" / "train" / new_run / "artifacts" / "note.txt").read_text() == \
        "after the move"
    assert not old.exists()
    # Relocated once: a second look finds nothing to move and says nothing.
    capsys.readouterr()
    assert tracking.relocate_store(new / "mlflow.db", new) is None
    assert capsys.readouterr().out == ""


def test_a_store_whose_schema_differs_gets_one_line_and_is_left_unchanged(tmp_path, tracking_on,
                                                                           capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    log_file(old, "a-1", "before the move")
    shutil.move(old, new)
    db = new / "mlflow.db"
    # As if another MLflow release had renamed the column that holds a run's artifact location.
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE runs RENAME COLUMN artifact_uri TO artifact_root")
    con.close()
    before = _digest(db)

    with pytest.raises(tracking.TrackingError) as err:
        tracking.relocate_store(db, new)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{db}: the checkout was copied or moved (artifact locations "
                               f"point at {old.as_uri()}) but table runs has no column "
                               "artifact_uri")
    assert f"mlflow=={CHECKED_MLFLOW}" in message and f"MLflow {CHECKED_MLFLOW} is installed" \
        in message
    assert "nothing was changed: install the pinned MLflow (make install)" in message
    assert _digest(db) == before
    assert capsys.readouterr().out == ""
    # A stage stops there, in that one line, before it creates a run.
    with pytest.raises(tracking.TrackingError, match="table runs has no column artifact_uri"):
        tracking.start_run("train", "a-2", stage="train@a-2", root=new)
    assert _digest(db) == before
