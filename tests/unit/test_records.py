"""Curve.read checks the training-success columns the loop writes after the evaluation ones:
present, numeric, in [0, 1], empty exactly where no training episode finished, for the tasks of
the success/ columns in their order."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ptsl.core.errors import CorruptFileError
from ptsl.core.records import Curve

from .report_data import TASKS, curve, write_curve

STEPS = [0, 150, 300]


def _good(rng_seed: int = 0) -> pd.DataFrame:
    # Two episodes per task in the first window, none in the second, one in the third.
    episodes = {0: 0, 150: 2, 300: 1}
    frame = curve(STEPS, episodes.__getitem__, np.random.default_rng(rng_seed))
    frame.loc[2, "train_episodes"] = 1
    return frame


def _read(tmp_path, frame: pd.DataFrame) -> pd.DataFrame:
    return Curve.read(write_curve(tmp_path / "curve.csv", frame), 300, [150, 300])


def _refused(tmp_path, frame: pd.DataFrame, says: str) -> None:
    with pytest.raises(CorruptFileError) as err:
        _read(tmp_path, frame)
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'curve.csv'}: training curve is unreadable")
    assert says in msg and "\n" not in msg


def test_a_curve_the_loop_writes_reads_back(tmp_path):
    frame = _good()
    frame.loc[1, "train_episodes"] = 0  # the second window: none finished
    frame.loc[1, ["train_success", *[f"train_success/{t}" for t in TASKS]]] = math.nan
    got = _read(tmp_path, frame)
    cols = list(got.columns)
    assert cols[:4] == ["step", "env_steps", "success", "return"]
    assert cols[cols.index("train_episodes"):] == (
        ["train_episodes", "train_success", *[f"train_success/{t}" for t in TASKS]])
    assert got["train_episodes"].tolist() == [0, 0, 1]
    assert got["train_episodes"].dtype.kind == "i"
    assert got.loc[[0, 1], "train_success"].isna().all() and got.loc[2, "train_success"] >= 0


def test_columns_are_required(tmp_path):
    _refused(tmp_path, _good().drop(columns=["train_episodes"]), "no columns ['train_episodes']")
    _refused(tmp_path, _good().drop(columns=["train_success"]), "no columns ['train_success']")
    _refused(tmp_path, _good().drop(columns=[f"train_success/{TASKS[3]}"]),
             "train_success/<task> columns do not name the tasks")


def test_train_tasks_follow_the_success_tasks_in_order(tmp_path):
    frame = _good()
    cols = list(frame.columns)
    a, b = cols.index(f"train_success/{TASKS[0]}"), cols.index(f"train_success/{TASKS[1]}")
    cols[a], cols[b] = cols[b], cols[a]
    _refused(tmp_path, frame[cols], "in their order")
    renamed = _good().rename(columns={f"train_success/{TASKS[0]}": "train_success/other-v3"})
    _refused(tmp_path, renamed, "do not name the tasks")


def test_values_are_numeric_rates(tmp_path):
    frame = _good()
    frame["train_success"] = frame["train_success"].astype(object)
    frame.loc[1, "train_success"] = "high"
    _refused(tmp_path, frame, "non-numeric values")
    frame = _good()
    frame.loc[1, f"train_success/{TASKS[2]}"] = 1.5
    _refused(tmp_path, frame, "training success values outside [0, 1]")
    frame = _good()
    frame.loc[2, "train_success"] = -0.1
    _refused(tmp_path, frame, "training success values outside [0, 1]")


def test_empty_exactly_where_no_episode_finished(tmp_path):
    frame = _good()
    frame.loc[1, f"train_success/{TASKS[4]}"] = math.nan  # episodes finished, value missing
    _refused(tmp_path, frame, "training success at step 150 must be empty exactly where")
    frame = _good()
    frame.loc[0, "train_success"] = 0.5  # a rate where no episode finished
    _refused(tmp_path, frame, "training success at step 0 must be empty exactly where")


def test_episode_counts(tmp_path):
    for value in (-1, 1.5):
        frame = _good()
        frame["train_episodes"] = frame["train_episodes"].astype(float)
        frame.loc[1, "train_episodes"] = value
        _refused(tmp_path, frame, "train_episodes must be whole numbers >= 0, 0 at step 0")
    frame = _good()
    frame.loc[0, "train_episodes"] = 3
    frame.loc[0, ["train_success", *[f"train_success/{t}" for t in TASKS]]] = 0.5
    _refused(tmp_path, frame, "0 at step 0")
    frame = _good()
    frame["train_episodes"] = frame["train_episodes"].astype(float)
    frame.loc[1, "train_episodes"] = math.nan
    _refused(tmp_path, frame, "missing values")


def test_evaluation_columns_still_may_not_be_empty(tmp_path):
    frame = _good()
    frame.loc[1, f"success/{TASKS[0]}"] = math.nan
    _refused(tmp_path, frame, "empty or with missing values")
