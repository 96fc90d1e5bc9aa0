"""The records the ``branches_ptsl`` stage leaves for a PTSL run, in
``data/branches/<run>/``, with their writer and their checked reader:

- ``branches.csv`` (:data:`NORM_COLUMNS`): per PTSL layer (actor trunk, both Q networks) and
  task, then per layer as the mean over tasks (task :data:`MEAN_TASK`), the norms of the task
  branch's and the shared path's parts of the layer's output on the evaluate stage's episodes,
  and of their weights (:func:`ptsl.core.branches.measure_observations` says what each is);
- ``zeroed.csv`` (:data:`ZEROED_COLUMNS`): per task, success and return of the deterministic
  policy on the evaluate stage's episodes with the agent intact and with every PTSL layer's task
  branch zeroed (:func:`ptsl.core.branches.zeroed_task_branches`).

Pandas only: the aggregate reads these without loading torch, an agent or an environment.
Every byte is a function of the run and the config (no time, no host), so DVC hashes reproduce.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from .errors import CorruptFileError
from .files import folder_aside, write_atomic
from .records import REBUILD, csv_bytes_frame, run_id

NORMS_FILE = "branches.csv"
ZEROED_FILE = "zeroed.csv"
#: The ``task`` of the rows that average a layer over its benchmark's tasks.
MEAN_TASK = "mean"
#: Columns of ``branches.csv``, in order.
NORM_COLUMNS = ("run", "experiment", "seed", "method", "network", "layer", "task",
                "observations", "in_dim", "out_dim", "p_in", "p_out", "down", "up",
                "shared_weight_norm", "shared_bias_norm", "down_norm", "up_norm",
                "task_weight_norm", "task_weight_change", "task_bias_norm",
                "task_output_norm", "shared_output_norm", "ratio")
#: Columns of ``zeroed.csv``, in order: one row per task, in benchmark order.
ZEROED_COLUMNS = ("run", "experiment", "seed", "method", "task", "episodes",
                  "intact_success", "zeroed_success", "intact_return", "zeroed_return")
_ROLES = {NORMS_FILE: ("task-branch norms", NORM_COLUMNS),
          ZEROED_FILE: ("task-branch zeroing result", ZEROED_COLUMNS)}


def write_branch_records(folder: Path, norms: pd.DataFrame, zeroed: pd.DataFrame) -> None:
    """Write both records of one run into ``folder`` (replaced whole, only once both are
    written: a failure leaves what was there)."""
    for frame, columns in ((norms, NORM_COLUMNS), (zeroed, ZEROED_COLUMNS)):
        if tuple(frame.columns) != columns:
            raise ValueError(f"expected columns {list(columns)}, got {list(frame.columns)}")
    with folder_aside(folder, "task-branch records") as staged:
        write_atomic(staged / NORMS_FILE, norms.to_csv(index=False), _ROLES[NORMS_FILE][0])
        write_atomic(staged / ZEROED_FILE, zeroed.to_csv(index=False), _ROLES[ZEROED_FILE][0])


def _read(path: Path, name: str, experiment: str, seed: int) -> pd.DataFrame:
    role, columns = _ROLES[name]
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run `dvc repro` to produce it (the "
                                f"branches_ptsl stage of {run_id(experiment, seed)})")
    frame = csv_bytes_frame(path, path.read_bytes(), role)
    if tuple(frame.columns) != columns:
        raise CorruptFileError(path, role, f"columns {list(frame.columns)}, expected "
                               f"{list(columns)}", REBUILD)
    if frame.empty:
        raise CorruptFileError(path, role, "no rows", REBUILD)
    found = set(zip(frame["experiment"], frame["seed"]))
    if found != {(experiment, seed)}:
        raise CorruptFileError(path, role, f"rows of {sorted(found)}, not only of "
                               f"{experiment!r} seed {seed}", REBUILD)
    return frame


def _check_zeroed(path: Path, frame: pd.DataFrame) -> None:
    role = _ROLES[ZEROED_FILE][0]
    for col in ("intact_success", "zeroed_success"):
        values = pd.to_numeric(frame[col], errors="coerce")
        if values.isna().any() or not values.between(0.0, 1.0).all():
            raise CorruptFileError(path, role, f"{col}: every value a number in [0, 1]",
                                   REBUILD)
    if frame["task"].duplicated().any():
        raise CorruptFileError(path, role, "a task listed twice", REBUILD)


def read_branch_records(folder: Path, experiment: str,
                        seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(norms, zeroed)`` of run ``experiment``-``seed`` from its folder ``folder``, checked:
    both files there, whole, with their columns and only that run's rows, successes in [0, 1].
    A missing file is a FileNotFoundError, anything else a CorruptFileError naming it."""
    folder = Path(folder)
    norms = _read(folder / NORMS_FILE, NORMS_FILE, experiment, seed)
    zeroed = _read(folder / ZEROED_FILE, ZEROED_FILE, experiment, seed)
    _check_zeroed(folder / ZEROED_FILE, zeroed)
    return norms, zeroed


def read_runs(branches_dir: Path, runs: Sequence[tuple[str, int]]
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`read_branch_records` of every ``(experiment, seed)`` in ``runs`` under
    ``branches_dir``, each record type as one frame in ``runs``' order (empty frames with the
    columns when ``runs`` is empty)."""
    pairs = [read_branch_records(Path(branches_dir) / run_id(e, s), e, s) for e, s in runs]
    if not pairs:
        return pd.DataFrame(columns=list(NORM_COLUMNS)), pd.DataFrame(columns=list(ZEROED_COLUMNS))
    return (pd.concat([p[0] for p in pairs], ignore_index=True),
            pd.concat([p[1] for p in pairs], ignore_index=True))
