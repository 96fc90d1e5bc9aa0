"""The data behind the tables, in the shapes other projects' results are shared in: one long CSV
of every run's per-task curve (``reports/data/runs.csv``, as TD-MPC2 and SimbaV2 ship theirs) and
one ``.npz`` per table whose arrays rliable reads as they are (``score_dict[row] = (runs,
tasks)``). docs/statistics.md shows the line that loads each.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..ops.params import Params, TableConfig
from .comparison import METRICS
from .inputs import RunRecords
from .stats import PREFIX, scores_at, task_columns, task_name

#: Columns of the long CSV, in order (docs/statistics.md says what each holds).
LONG_COLUMNS = ("benchmark", "experiment", "method", "seed", "task", "step", "env_steps",
                "evaluation_success", "evaluation_return_task_mean", "evaluation_episodes",
                "training_success", "training_episodes", "parameters", "protocol")
# A fixed time stamp for every member of an .npz, so the same arrays give the same bytes (numpy's
# own savez stamps the current time, which would change the file on every run).
_EPOCH = (1980, 1, 1, 0, 0, 0)


def long_frame(params: Params, records: RunRecords) -> pd.DataFrame:
    """One row per (benchmark, experiment, method, seed, task, evaluation step) of every run."""
    frames = []
    for (exp, seed), run in records.curves.groupby(["experiment", "seed"], sort=False):
        cfg = params.experiments[exp]
        evaluation = task_columns(records.curves, exp, "evaluation")
        tasks = [task_name(c) for c in evaluation]
        count = records.evals.loc[records.evals["experiment"] == exp, "parameter_count"]
        for task in tasks:
            frames.append(pd.DataFrame({
                "benchmark": cfg.benchmark, "experiment": exp, "method": cfg.method,
                "seed": int(seed), "task": task, "step": run["step"].to_numpy(),
                "env_steps": run["env_steps"].to_numpy(),
                "evaluation_success": run[PREFIX["evaluation"] + task].to_numpy(),
                # The curve keeps the evaluation return as the mean over tasks only.
                "evaluation_return_task_mean": run["return"].to_numpy(),
                "evaluation_episodes": params.train.eval_episodes,
                "training_success": run[PREFIX["training"] + task].to_numpy(),
                "training_episodes": run["train_episodes"].to_numpy(),
                "parameters": int(count.iloc[0]), "protocol": params.protocol}))
    return pd.concat(frames, ignore_index=True)[list(LONG_COLUMNS)]


def table_arrays(params: Params, table: TableConfig,
                 records: RunRecords) -> dict[str, np.ndarray]:
    """A table's arrays: ``<metric>/<experiment>`` the score of each seed on each task at the
    table's step (seeds x tasks, the kind ``report.primary`` names; NaN where training success
    is empty), ``<metric>_curves/<experiment>`` every evaluation up to it (seeds x tasks x
    evaluations), and ``steps``, ``seeds``, ``tasks``: the axes."""
    step, seeds = params.table_step(table), params.table_seeds(table)
    upto = records.curves[records.curves["step"] <= step]
    steps = np.sort(upto.loc[upto["experiment"].isin(table.rows), "step"].unique())
    out: dict[str, np.ndarray] = {"steps": steps.astype(np.int64),
                                  "seeds": np.asarray(seeds, dtype=np.int64)}
    for name in table.rows:
        for metric in METRICS:
            scores = scores_at(records.curves, name, seeds, step, params.report.primary, metric)
            out["tasks"] = np.asarray(scores.tasks)
            out[f"{metric}/{name}"] = np.asarray(scores.values, dtype=float)
            columns = task_columns(records.curves, name, metric)
            runs = [upto[(upto["experiment"] == name) & (upto["seed"] == s)]
                    .set_index("step")[columns].reindex(steps) for s in seeds]
            # (seeds, evaluations, tasks) -> (seeds, tasks, evaluations)
            out[f"{metric}_curves/{name}"] = np.stack(
                [r.to_numpy(dtype=float) for r in runs]).transpose(0, 2, 1)
    return out


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """``arrays`` as an ``.npz`` (what ``np.load`` reads), the same bytes for the same arrays."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, value in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def data_files(params: Params, records: RunRecords) -> dict[str, bytes | str]:
    """``runs.csv`` and one ``<table>.npz`` per table, by file name."""
    files: dict[str, bytes | str] = {"runs.csv": long_frame(params, records).to_csv(index=False)}
    for tname, table in params.tables.items():
        files[f"{tname}.npz"] = npz_bytes(table_arrays(params, table, records))
    return files
