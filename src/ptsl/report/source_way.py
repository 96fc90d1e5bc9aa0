"""Our number computed the way a published source computed its own, to stand beside it.

A source states its statistic (``data/published/<source>.yaml``, ``statistic``): each run's score
(``run_score``: its mean over tasks at the step, ``final``, or its best mean over tasks so far,
``best``) and how the runs' scores combine (``over_seeds``: their ``mean``, or their ``iqm``: the
runs between the first and third quartile, averaged, as the parameter-scaling paper's plotting
code does). That is a statistic of the per-run means over tasks, not the rliable IQM over
runs x tasks of :mod:`ptsl.report.stats`: per-task success piles up at 0 and 1, so the two can
differ by far more than a published value's precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from .stats import Kind, Metric, scores_at

OverSeeds = Literal["mean", "iqm"]
#: How each way of combining the runs reads in a table note.
OVER_SEEDS_TEXT = {
    "mean": "mean over seeds",
    "iqm": "IQM over seeds (the runs between the first and third quartile, averaged)",
}
RUN_SCORE_TEXT = {
    "final": "each run's mean over tasks at the step",
    "best": "each run's best mean over tasks so far",
}


def combine_runs(per_run: np.ndarray, over_seeds: OverSeeds) -> float:
    """One number from the runs' scores: their mean, or the mean of those between the first and
    third quartile (quartiles at the nearest run, both ends kept: a filter on the runs, not
    scipy's trimmed mean)."""
    x = np.asarray(per_run, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"expected one score per run, got shape {x.shape}")
    if over_seeds == "mean":
        return float(x.mean())
    if over_seeds == "iqm":
        q1, q3 = np.quantile(x, [0.25, 0.75], method="nearest")
        return float(x[(x >= q1) & (x <= q3)].mean())
    raise ValueError(f"over_seeds must be 'mean' or 'iqm', got {over_seeds!r}")


def run_means(curves: pd.DataFrame, experiment: str, seeds: Sequence[int], step: int,
              run_score: Kind, metric: Metric) -> np.ndarray:
    """Each run's mean over tasks (at ``step``, or its best so far), runs without a value (no
    training episode finished) left out."""
    values = np.asarray(scores_at(curves, experiment, seeds, step, run_score, metric).values)
    full = values[~np.isnan(values).any(axis=1)]
    return full.mean(axis=1)


def as_published(curves: pd.DataFrame, experiment: str, seeds: Sequence[int], step: int,
                 metric: Metric, run_score: Kind, over_seeds: OverSeeds) -> float | None:
    """Our ``metric`` of ``experiment`` at ``step``, computed as the source states: None when
    no run has a value."""
    per_run = run_means(curves, experiment, seeds, step, run_score, metric)
    return combine_runs(per_run, over_seeds) if per_run.size else None


def run_range(curves: pd.DataFrame, experiment: str, seeds: Sequence[int], step: int,
              metric: Metric, run_score: Kind) -> tuple[float, float] | None:
    """The lowest and highest of the runs' scores that :func:`as_published` combines: where a
    single run of ours falls, set beside a published number that may be one run's (None with
    fewer than two runs with a value)."""
    per_run = run_means(curves, experiment, seeds, step, run_score, metric)
    return (float(per_run.min()), float(per_run.max())) if per_run.size >= 2 else None


def statistic_text(run_score: Kind, over_seeds: OverSeeds) -> str:
    """The statistic in words, e.g. "mean over seeds of each run's mean over tasks at the
    step"."""
    return f"{OVER_SEEDS_TEXT[over_seeds]} of {RUN_SCORE_TEXT[run_score]}"
