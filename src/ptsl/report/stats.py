"""Per-task scores at a reported step, the interquartile mean and stratified-bootstrap intervals.

This follows the convention of rliable (Agarwal et al., 2021, "Deep RL at the Edge of the
Statistical Precipice"): a score matrix has one row per run (seed) and one column per task, the
IQM is ``scipy.stats.trim_mean(x, 0.25, axis=None)`` over all of its values (rliable's
``aggregate_iqm``), and confidence intervals are percentile intervals of a stratified bootstrap
that resamples runs with replacement independently within each task (rliable's
``StratifiedBootstrap``).

We implement it here instead of depending on rliable: rliable 1.2.0 needs ``arch<8``, and arch 7.x
fails to import with pandas 3 (a TypeError in its ``deprecate_kwarg``). Only numpy and scipy are
used, every random draw comes from a ``numpy.random.Generator`` the caller passes in, and the
bootstrap is vectorised over replicates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ..core.records import TASK_PREFIX, TRAIN_PREFIX

Kind = Literal["final", "best"]
#: evaluation: the deterministic evaluations (``success/<task>``); training: the training
#: episodes' windowed rate (``train_success/<task>``), empty where no episode finished.
Metric = Literal["evaluation", "training"]
PREFIX = {"evaluation": TASK_PREFIX, "training": TRAIN_PREFIX}
# A statistic maps score matrices of shape (..., runs, tasks) to one value per leading index.
Statistic = Callable[[np.ndarray], "np.ndarray | float"]

# Resampled values held in memory at once by the bootstrap (float64: 8 bytes each, so ~32 MiB).
_MAX_BOOTSTRAP_ELEMENTS = 4_000_000


@dataclass(frozen=True, eq=False)
class Scores:
    """A runs x tasks score matrix: ``values[i, j]`` is seed ``seeds[i]``'s success on ``tasks[j]``."""

    values: np.ndarray
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]


def task_columns(curves: pd.DataFrame, experiment: str | None = None,
                 metric: Metric = "evaluation") -> list[str]:
    """The per-task columns of ``metric`` (``success/<task>`` or ``train_success/<task>``, frame
    order) that belong to ``experiment``.

    Curves of experiments on different benchmarks (MT10, MT50) share one frame after
    ``report.collect``; each run only fills the columns of its own benchmark's tasks (its
    evaluation columns, which are never empty, tell which).
    """
    prefix = PREFIX[metric]
    cols = [c for c in curves.columns if isinstance(c, str) and c.startswith(prefix)]
    if experiment is None:
        return cols
    rows = curves[curves["experiment"] == experiment]
    own = {task_name(c) for c in curves.columns if isinstance(c, str)
           and c.startswith(TASK_PREFIX) and rows[c].notna().any()}
    return [c for c in cols if task_name(c) in own]


def task_name(column: str) -> str:
    """``success/reach-v3`` or ``train_success/reach-v3`` -> ``reach-v3``."""
    for prefix in (TASK_PREFIX, TRAIN_PREFIX):
        if column.startswith(prefix):
            return column[len(prefix):]
    return column


def scores_at(curves: pd.DataFrame, experiment: str, seeds: Sequence[int], step: int,
              kind: Kind = "final", metric: Metric = "evaluation") -> Scores:
    """Per-task success of each seed's run of ``experiment`` at the reported ``step``.

    ``kind="final"`` takes the row at exactly ``step``. ``kind="best"`` takes the run's row at
    steps <= ``step`` with the highest mean success over tasks (best so far; the earliest on
    ties) and reports that row's per-task values, so a run is never credited with task peaks
    reached at different times. The run must still have a row at exactly ``step`` so that every
    run is reported at the same budget. Rows follow ``seeds``, columns the task order of the
    curve files.

    ``metric="training"`` reads the training success: a row where no training episode finished
    is empty; ``best`` skips such rows, and a run with no value (``final`` on an empty row, or
    no episode up to ``step``) gets a row of NaN (:func:`summarize_available` leaves it out).

    Raises ValueError when a run is missing, has no row (or more than one) at ``step``, or
    lacks a task's evaluation success there.
    """
    if kind not in ("final", "best"):
        raise ValueError(f"kind must be 'final' or 'best', got {kind!r}")
    if metric not in PREFIX:
        raise ValueError(f"metric must be 'evaluation' or 'training', got {metric!r}")
    if len(seeds) == 0:
        raise ValueError(f"no seeds given for experiment {experiment!r}")
    columns = task_columns(curves, experiment, metric)
    if not columns:
        present = sorted(curves["experiment"].unique().tolist())
        raise ValueError(f"experiment {experiment!r} has no per-task {metric} success columns "
                         f"in the curves (experiments present: {present})")
    exp_rows = curves[curves["experiment"] == experiment]
    rows = []
    for seed in seeds:
        run = exp_rows[exp_rows["seed"] == seed]
        if run.empty:
            raise ValueError(f"no curve for experiment {experiment!r} seed {seed} (run missing; "
                             f"seeds present: {sorted(exp_rows['seed'].unique().tolist())})")
        at = run[run["step"] == step]
        if len(at) != 1:
            steps = sorted(run["step"].unique().tolist())
            what = "no evaluation" if at.empty else f"{len(at)} evaluations"
            raise ValueError(f"experiment {experiment!r} seed {seed} has {what} at step {step} "
                             f"(steps present: {steps})")
        if kind == "final":
            picked = at[columns].iloc[0]
        else:
            upto = run[run["step"] <= step].sort_values("step")
            means = upto[columns].mean(axis=1, skipna=False).to_numpy()
            filled = ~np.isnan(means)
            picked = (upto[columns].iloc[int(np.argmax(np.where(filled, means, -np.inf)))]
                      if filled.any() else upto[columns].iloc[-1])
        missing = [task_name(c) for c in columns if pd.isna(picked[c])]
        if missing and (metric == "evaluation" or len(missing) < len(columns)):
            raise ValueError(f"experiment {experiment!r} seed {seed} has no {metric} success "
                             f"value at step {step} for tasks {missing}")
        rows.append(picked.to_numpy(dtype=float))
    values = np.vstack(rows)
    values.setflags(write=False)  # Scores is frozen; keep its matrix from being edited in place
    return Scores(values=values, tasks=tuple(task_name(c) for c in columns),
                  seeds=tuple(int(s) for s in seeds))


def _as_matrix(scores: Scores | np.ndarray) -> np.ndarray:
    x = np.asarray(scores.values if isinstance(scores, Scores) else scores, dtype=float)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"scores must be a non-empty runs x tasks matrix, got shape {x.shape}")
    return x


def iqm(x: np.ndarray) -> np.ndarray | float:
    """Interquartile mean of all values of a runs x tasks matrix (rliable's ``aggregate_iqm``).

    A stack of shape (..., runs, tasks) gives one IQM per leading index, which is how the
    bootstrap evaluates all replicates in one call.
    """
    from scipy.stats import trim_mean  # 0.6 s to import: only where a statistic is computed

    x = np.asarray(x, dtype=float)
    if x.ndim <= 2:
        return float(trim_mean(x, 0.25, axis=None))
    return trim_mean(x.reshape(x.shape[:-2] + (-1,)), 0.25, axis=-1)


def mean_score(x: np.ndarray) -> np.ndarray | float:
    """Mean of all values of a runs x tasks matrix (batched like :func:`iqm`)."""
    x = np.asarray(x, dtype=float)
    if x.ndim <= 2:
        return float(x.mean())
    return x.mean(axis=(-2, -1))


def stratified_bootstrap_ci(scores: Scores | np.ndarray, statistic: Statistic, reps: int,
                            rng: np.random.Generator,
                            confidence: float = 0.95) -> tuple[float, float]:
    """Percentile confidence interval of ``statistic`` under a stratified bootstrap.

    Each replicate resamples the runs (rows) with replacement independently within every task
    (column), as rliable's ``StratifiedBootstrap``. ``statistic`` receives a stack of replicates
    of shape (k, runs, tasks) and must return k values (:func:`iqm` and :func:`mean_score` do).
    """
    x = _as_matrix(scores)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    runs, tasks = x.shape
    cols = np.arange(tasks)
    # Replicates are drawn in chunks so memory stays bounded for large reps or MT50 matrices;
    # the chunk size is a constant, so a given rng seed always gives the same interval.
    chunk = max(1, _MAX_BOOTSTRAP_ELEMENTS // x.size)
    values = np.empty(reps)
    for start in range(0, reps, chunk):
        k = min(chunk, reps - start)
        rows = rng.integers(0, runs, size=(k, runs, tasks))
        out = np.asarray(statistic(x[rows, cols]), dtype=float)  # -> (k, runs, tasks) -> (k,)
        if out.shape != (k,):
            raise ValueError(f"statistic must reduce (k, runs, tasks) to shape ({k},), "
                             f"got {out.shape}")
        values[start:start + k] = out
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class RowStats:
    """Summary of one experiment's score matrix (one results-table row)."""

    mean: float       # mean over seeds of each run's mean-over-tasks success
    std: float        # their std over seeds (ddof=1; 0.0 with one seed)
    iqm: float        # interquartile mean over all runs x tasks values
    iqm_low: float    # 95% stratified-bootstrap interval of the IQM
    iqm_high: float
    n_seeds: int
    mean_low: float   # 95% stratified-bootstrap interval of the mean (drawn after the IQM's)
    mean_high: float


def summarize(scores: Scores | np.ndarray, reps: int, rng: np.random.Generator) -> RowStats:
    """Mean ± std over seeds of per-run mean success and the IQM, each with its 95% bootstrap
    CI (the IQM's drawn first, so its interval is the one drawn before the mean had one)."""
    x = _as_matrix(scores)
    per_run = x.mean(axis=1)
    low, high = stratified_bootstrap_ci(x, iqm, reps, rng, confidence=0.95)
    mean_low, mean_high = stratified_bootstrap_ci(x, mean_score, reps, rng, confidence=0.95)
    return RowStats(mean=float(per_run.mean()),
                    std=float(per_run.std(ddof=1)) if len(per_run) > 1 else 0.0,
                    iqm=float(iqm(x)), iqm_low=low, iqm_high=high, n_seeds=int(x.shape[0]),
                    mean_low=mean_low, mean_high=mean_high)


def summarize_available(scores: Scores, reps: int,
                        rng: np.random.Generator) -> RowStats | None:
    """:func:`summarize` over the runs that have a value (a run's training success is empty
    when no training episode finished); None when no run has one."""
    x = np.asarray(scores.values, dtype=float)
    full = x[~np.isnan(x).any(axis=1)]
    return summarize(full, reps, rng) if len(full) else None
