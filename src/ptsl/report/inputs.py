"""What the aggregate stage reads: every run's curve, summary and evaluation record (checked by
the readers of :mod:`ptsl.core.records`) and the numbers published elsewhere
(:class:`~ptsl.report.published.Published`, data/published/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core.records import Curve, Evaluation, Summary, run_id
from ..ops.params import Params, run_config
from .published import Published


@dataclass(frozen=True)
class RunRecords:
    """Evaluation records (one row per run) and training curves (one row per eval point)."""

    evals: pd.DataFrame
    curves: pd.DataFrame


def collect(params: Params, runs_dir: Path, evals_dir: Path) -> RunRecords:
    """Read and check the outputs of every (experiment, seed) the params list; a missing one
    is a FileNotFoundError, a truncated or inconsistent one a CorruptFileError naming it."""
    eval_rows, curve_rows = [], []
    for exp in params.trained:
        for seed in params.seeds:
            name = run_id(exp, seed)
            final_step = run_config(params, exp, seed).train.steps
            steps = {params.table_step(t) for t in params.tables.values()
                     if exp in t.rows and seed in params.table_seeds(t)}
            record = Evaluation.read_of(evals_dir / f"{name}.json", exp, seed)
            eval_rows.append(record.model_dump(by_alias=True))
            curve = Curve.read(runs_dir / name / "curve.csv", final_step, sorted(steps))
            Summary.read_run(runs_dir / name / "summary.json", exp, seed, final_step)
            curve.insert(0, "seed", seed)
            curve.insert(0, "experiment", exp)
            curve_rows.append(curve)
    return RunRecords(evals=pd.DataFrame(eval_rows), curves=pd.concat(curve_rows, ignore_index=True))


__all__ = ["Published", "RunRecords", "collect"]
