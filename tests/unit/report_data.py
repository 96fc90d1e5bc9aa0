"""Curves with both metrics, written by the real writer (``Curve.row``), and small params for the
report tests: what the training loop's records look like, built without training."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import yaml

from ptsl.core.records import Curve
from ptsl.ops.params import Params, parse_params
from ptsl.report.inputs import RunRecords

from ..conftest import ROOT

TASKS = [f"task{i}-v3" for i in range(10)]
RAW = yaml.safe_load((ROOT / "params.yaml").read_text())


def curve(steps: list[int], episodes: Callable[[int], int],
          rng: np.random.Generator, tasks: list[str] = TASKS) -> pd.DataFrame:
    """A run's curve at ``steps``: random evaluation success per task, ``episodes(step)``
    training episodes per task in each window (their rates random; empty where 0)."""
    rows = []
    for step in steps:
        ev = rng.integers(0, 2, len(tasks)).astype(float)
        n = episodes(step)
        train = dict(zip(tasks, rng.integers(0, n + 1, len(tasks)) / n)) if n else None
        rows.append(Curve.row(step, step * len(tasks), float(ev.mean()), 1.5,
                              dict(zip(tasks, ev)), n, train))
    return Curve.frame(rows)


def write_curve(path: Path, frame: pd.DataFrame) -> Path:
    Curve.write(path, frame)
    return path


def params(tables: tuple[str, ...] = ("mt10_200k", "mt10_1m"), protocol: str = "reference",
           **report: Any) -> Params:
    """The project's params with only ``tables`` (their experiments as written), the named
    protocol's keys, a short bootstrap and the ``report`` keys given."""
    raw = copy.deepcopy(RAW)
    raw["tables"] = {k: raw["tables"][k] for k in tables}
    for dotted, value in raw["protocols"][protocol].items():
        section, key = dotted.split(".")
        raw[section][key] = value
    raw["protocol"] = protocol
    raw["report"].update({"bootstrap_reps": 50, **report})
    return parse_params(raw)


def records(p: Params, episodes: Callable[[int], int] = lambda s: 0 if s == 0 else 1,
            seed: int = 0) -> RunRecords:
    """Curves of every experiment of ``p``'s tables, every seed, to its last step."""
    rng = np.random.default_rng(seed)
    frames, evals = [], []
    names = list(dict.fromkeys(r for t in p.tables.values() for r in t.rows))
    for name in names:
        for s in p.seeds:
            last = p.train.long_steps if p.experiments[name].long else p.train.steps
            frame = curve(list(range(0, last + 1, p.train.eval_every)), episodes, rng)
            frame.insert(0, "seed", s)
            frame.insert(0, "experiment", name)
            frames.append(frame)
        evals.append({"experiment": name, "parameter_count": 1000 + len(evals)})
    return RunRecords(evals=pd.DataFrame(evals), curves=pd.concat(frames, ignore_index=True))
