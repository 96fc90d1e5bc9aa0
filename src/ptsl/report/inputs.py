"""What the aggregate stage reads: every run's curve, summary and evaluation record (checked by
the readers of :mod:`ptsl.core.records`) and the numbers published elsewhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd

from ..core.errors import ConfigError, CorruptFileError
from ..core.records import Curve, Evaluation, Summary, run_id
from ..ops.params import Params, read_yaml, run_config


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


@dataclass(frozen=True)
class Published:
    """Success rates published elsewhere, under another protocol (kept as data with its source)."""

    source: str
    protocol: str
    success: Mapping[str, Mapping[str, float]]  # benchmark -> method -> success

    @staticmethod
    def load(path: Path) -> "Published":
        """Read and check the file; a malformed one is a CorruptFileError naming it."""
        if not path.is_file():
            raise FileNotFoundError(f"{path}: published numbers file not found; restore it with "
                                    f"`git checkout -- {path}`")
        try:
            raw = read_yaml(path)
        except ConfigError as exc:
            raise _corrupt_published(path, str(exc).removeprefix(f"{path}: ")) from None
        if not isinstance(raw, Mapping) or not {"source", "protocol", "success"} <= set(raw):
            raise _corrupt_published(path, "expected the keys source, protocol and success")
        success = raw["success"]
        if not isinstance(success, Mapping) or not all(
                isinstance(methods, Mapping) and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool)
                    for v in methods.values()) for methods in success.values()):
            raise _corrupt_published(path, "success: expected benchmark -> method -> number")
        return Published(source=str(raw["source"]), protocol=str(raw["protocol"]),
                         success=success)

    def get(self, benchmark: str, method: str) -> float | None:
        return self.success.get(benchmark, {}).get(method)


def _corrupt_published(path: Path, detail: str) -> CorruptFileError:
    return CorruptFileError(path, "published numbers file", detail,
                            f"restore it with `git checkout -- {path}`")
