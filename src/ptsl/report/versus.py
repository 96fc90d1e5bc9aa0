"""One setting against another, method by method: a study beside the study it repeats with one
setting changed (``report.versus``: the v2 reward against the v1 reward of ``mt10-b1280``).

The other study's runs come from its committed data file (``reports/data/runs.csv``, written by
:mod:`ptsl.report.datafiles`), read back into the curves' shape (:func:`curves_from_long`), so
both studies' runs are scored by one function (:func:`ptsl.report.stats.scores_at`): each run's
headline metric at the table's step, as the table's mean column. Seed ``s`` of one study and
seed ``s`` of the other share goals, initialisation and sampling generator, so runs pair by
seed. For the table's rows and seeds, :func:`versus` gives

- each row's mean under both settings with a 95% Student t interval over seeds;
- each row's per-seed differences (this minus other), their mean and 95% t interval;
- for each contrast the table names, the interaction: the contrast under this setting minus
  under the other, seed by seed, with its mean and interval;
- each row's per-task success (mean over seeds) under both, and which tasks this setting
  brings off the floor (0 in every run under the other setting, above 0 under this one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.records import TASK_PREFIX, TRAIN_PREFIX
from ..ops.params import Params, TableConfig
from .contrasts import t_interval
from .stats import scores_at


def curves_from_long(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``runs.csv`` frame back in the curves' shape: one row per (experiment, seed, step) with
    ``success/<task>`` and ``train_success/<task>`` columns in the file's task order."""
    tasks = list(dict.fromkeys(frame["task"]))
    keys = ["experiment", "seed", "step"]
    wide = [frame.pivot_table(index=keys, columns="task", values=column, dropna=False,
                              aggfunc="first").reindex(columns=tasks).add_prefix(prefix)
            for column, prefix in (("evaluation_success", TASK_PREFIX),
                                   ("training_success", TRAIN_PREFIX))]
    return pd.concat(wide, axis=1).reset_index()


def read_runs(path: Path) -> pd.DataFrame:
    """The curves of a study's ``reports/data/runs.csv``; FileNotFoundError naming what makes it."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; it is written by that study's aggregate "
                                "(make study-<name>)")
    return curves_from_long(pd.read_csv(path))


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its 95% t interval, and the values it is the mean of."""

    values: tuple[float, ...]
    seeds: tuple[int, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        return t_interval(self.values)


def _estimate(values: np.ndarray, seeds: Sequence[int]) -> Estimate:
    keep = ~np.isnan(values)
    return Estimate(tuple(float(v) for v in values[keep]),
                    tuple(int(s) for s, k in zip(seeds, keep) if k))


@dataclass(frozen=True)
class RowVersus:
    """One row under both settings: its means, its per-seed differences, its per-task means."""

    row: str
    this: Estimate
    other: Estimate
    difference: Estimate               # this minus other, per seed
    tasks: tuple[str, ...]
    this_tasks: tuple[float, ...]      # per task, mean over seeds
    other_tasks: tuple[float, ...]

    def off_the_floor(self) -> tuple[str, ...]:
        """Tasks at 0 under the other setting and above 0 under this one."""
        return tuple(t for t, a, b in zip(self.tasks, self.this_tasks, self.other_tasks)
                     if b == 0 and a > 0)


@dataclass(frozen=True)
class Interaction:
    """A contrast (``row`` minus ``minus``) under this setting minus under the other, per seed."""

    row: str
    minus: str
    primary: bool
    estimate: Estimate


@dataclass(frozen=True)
class Versus:
    """The view of one table: its rows and its contrasts' interactions."""

    rows: tuple[RowVersus, ...]
    interactions: tuple[Interaction, ...]


def _run_scores(curves: pd.DataFrame, row: str, seeds: Sequence[int], step: int,
                params: Params) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per seed the run's mean over tasks, and the per-task matrix's task means (NaN-free)."""
    scores = scores_at(curves, row, seeds, step, params.report.primary, params.report.metric)
    return scores.values, scores.tasks


def versus(params: Params, table: TableConfig, this: pd.DataFrame,
           other: pd.DataFrame) -> Versus:
    """The table's rows and contrasts under this study's runs (``this``) against the other
    study's (``other``), both in the curves' shape, at the table's step and seeds."""
    step, seeds = params.table_step(table), params.table_seeds(table)
    means: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for name in table.rows:
        a, tasks = _run_scores(this, name, seeds, step, params)
        b, other_tasks = _run_scores(other, name, seeds, step, params)
        if other_tasks != tasks:
            raise ValueError(f"{name}: the other study's tasks {list(other_tasks)} are not this "
                             f"study's {list(tasks)}")
        ma, mb = a.mean(axis=1), b.mean(axis=1)
        means[name] = (ma, mb)
        rows.append(RowVersus(name, _estimate(ma, seeds), _estimate(mb, seeds),
                              _estimate(ma - mb, seeds), tasks,
                              tuple(float(x) for x in np.nanmean(a, axis=0)),
                              tuple(float(x) for x in np.nanmean(b, axis=0))))
    interactions = []
    for c in table.contrasts:
        (ra, rb), (ma, mb) = means[c.row], means[c.minus]
        interactions.append(Interaction(c.row, c.minus, c.primary,
                                        _estimate((ra - ma) - (rb - mb), seeds)))
    return Versus(tuple(rows), tuple(interactions))


def _cell(e: Estimate, signed: bool = False) -> str:
    lo, hi = e.interval
    fmt = "+.3f" if signed else ".3f"
    if np.isnan(lo):
        return f"{e.mean:{fmt}}"
    return f"{e.mean:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def versus_markdown(view: Versus, labels: Mapping[str, str], this: str, other: str,
                    setting: str, study: str, metric: str, step: int) -> str:
    """The view as Markdown: the rows' means and differences, the interactions, the per-task
    table and what this setting brings off the floor."""
    seeds = sorted({s for r in view.rows for s in r.difference.seeds})
    lines = [f"**{setting}: {this} against {other}** (study `{study}` under {other}; {metric} "
             f"success at {step:,} vector steps per task, each run's mean over tasks; mean [95% t "
             "interval] over seeds; differences paired by seed):", "",
             f"| row | {this} | {other} | {this} − {other} | "
             + " | ".join(f"seed {s}" for s in seeds) + " |",
             "|---|---|---|---|" + "---:|" * len(seeds)]
    for r in view.rows:
        by_seed = dict(zip(r.difference.seeds, r.difference.values))
        lines.append(f"| {labels[r.row]} | {_cell(r.this)} | {_cell(r.other)} | "
                     f"{_cell(r.difference, True)} | "
                     + " | ".join(f"{by_seed[s]:+.3f}" if s in by_seed else "—" for s in seeds)
                     + " |")
    if view.interactions:
        lines += ["", f"Interaction: each contrast under {this} minus under {other}, seed by "
                      "seed:", "", "| contrast | mean [95% t interval] | "
                  + " | ".join(f"seed {s}" for s in seeds) + " |",
                  "|---|---|" + "---:|" * len(seeds)]
        for i in view.interactions:
            by_seed = dict(zip(i.estimate.seeds, i.estimate.values))
            mark = " (primary)" if i.primary else ""
            lines.append(f"| ({labels[i.row]} − {labels[i.minus]}){mark} | "
                         f"{_cell(i.estimate, True)} | "
                         + " | ".join(f"{by_seed[s]:+.3f}" if s in by_seed else "—"
                                      for s in seeds) + " |")
    tasks = view.rows[0].tasks
    lines += ["", f"Per task, mean over seeds, {this} / {other}:", "",
              "| row | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for r in view.rows:
        lines.append(f"| {labels[r.row]} | " + " | ".join(
            f"{a:.2f} / {b:.2f}" for a, b in zip(r.this_tasks, r.other_tasks)) + " |")
    lines.append("")
    for r in view.rows:
        off = r.off_the_floor()
        lines.append(f"- {labels[r.row]}: {this} brings "
                     + (", ".join(off) if off else "no task") + f" off the floor (0 in every "
                     f"{other} run, above 0 under {this}).")
    return "\n".join(lines) + "\n"


def versus_frame(view: Versus, labels: Mapping[str, str]) -> pd.DataFrame:
    """One line per row (or interaction) and seed: the values under both settings and their
    difference; the CSV beside the Markdown."""
    out = []
    for r in view.rows:
        a, b = dict(zip(r.this.seeds, r.this.values)), dict(zip(r.other.seeds, r.other.values))
        for s, d in zip(r.difference.seeds, r.difference.values):
            out.append({"kind": "row", "name": labels[r.row], "seed": s, "this": a[s],
                        "other": b[s], "difference": d})
    for i in view.interactions:
        for s, d in zip(i.estimate.seeds, i.estimate.values):
            out.append({"kind": "interaction", "name": f"{labels[i.row]} − {labels[i.minus]}",
                        "seed": s, "this": float("nan"), "other": float("nan"),
                        "difference": d})
    return pd.DataFrame(out, columns=["kind", "name", "seed", "this", "other", "difference"])


__all__ = ["Estimate", "Interaction", "RowVersus", "Versus", "curves_from_long", "plot_versus",
           "read_runs", "versus", "versus_frame", "versus_markdown"]


def plot_versus(view: Versus, labels: Mapping[str, str], this: str, other: str,
                title: str, ylabel: str) -> bytes:
    """As PNG. Left: each row's runs under both settings, a line per seed from ``other`` to
    ``this``, and each setting's mean with its 95% t interval. Right: each row's per-task mean
    success, this minus other (the tasks a setting moves)."""
    from matplotlib.figure import Figure

    from .figures import png_bytes, short_task_name

    n = len(view.rows)
    fig = Figure(figsize=(12, 1.8 + 0.9 * n + 1.5), dpi=120, layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.6])
    for i, r in enumerate(view.rows):
        x0, x1 = 3 * i, 3 * i + 1
        a, b = dict(zip(r.this.seeds, r.this.values)), dict(zip(r.other.seeds, r.other.values))
        for s in r.difference.seeds:
            left.plot([x0, x1], [b[s], a[s]], color="0.6", lw=0.8, marker="o", ms=3, zorder=1)
        for x, e, color in ((x0, r.other, "tab:gray"), (x1, r.this, "tab:blue")):
            lo, hi = e.interval
            err = [[e.mean - lo], [hi - e.mean]] if np.isfinite(lo) else None
            left.errorbar([x], [e.mean], yerr=err, fmt="s", ms=7, color=color, capsize=5,
                          lw=1.8, zorder=2)
    left.set_xticks([3 * i + k for i in range(n) for k in (0, 1)],
                    [f"{labels[r.row]}\n{s}" for r in view.rows for s in (other, this)],
                    fontsize=7)
    left.set_ylabel(ylabel, fontsize=9)
    left.grid(axis="y", alpha=0.3)
    left.set_title(f"each seed's run under {other} and {this}; mean, 95% t interval",
                   fontsize=9)
    diff = np.array([[a - b for a, b in zip(r.this_tasks, r.other_tasks)] for r in view.rows])
    image = right.imshow(diff, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    right.set_xticks(range(diff.shape[1]), [short_task_name(t) for t in view.rows[0].tasks],
                     rotation=45, ha="right", fontsize=7)
    right.set_yticks(range(n), [labels[r.row] for r in view.rows], fontsize=8)
    for (y, x), value in np.ndenumerate(diff):
        right.text(x, y, f"{value:+.2f}", ha="center", va="center", fontsize=6)
    right.set_title(f"per task, mean over seeds: {this} minus {other}", fontsize=9)
    fig.colorbar(image, ax=right, shrink=0.8)
    fig.suptitle(title, fontsize=10)
    return png_bytes(fig)
