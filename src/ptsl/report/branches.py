"""PTSL's task branches in the reports, from what the ``branches_ptsl`` stages recorded for every
PTSL run (``data/branches/<run>/``, :mod:`ptsl.core.branch_records`; how they are measured:
:mod:`ptsl.core.branches`). This module reads those files only: no agent, network or
environment is loaded here.

- ``data/branches.csv``: every run's norms, one file; ``figures/branches.png`` draws them;
- ``data/branches_zeroed.csv``: is the task layer used? Per PTSL row and task, and for the mean
  over tasks, evaluation success with the agent intact and with every task branch zeroed (the
  shared path alone), on the same episodes, each the mean over seeds, and the mean of the
  per-seed differences (intact minus zeroed) with a 95% Student t interval;
- a section of ``results.md`` with both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.branch_records import MEAN_TASK, read_runs
from ..ops.params import Params
from .contrasts import LEVEL, t_interval

CSV_NAME = "branches.csv"
ZEROED_CSV_NAME = "branches_zeroed.csv"
FIGURE_NAME = "branches.png"
#: Columns of ``branches_zeroed.csv``, in order.
ZEROED_TABLE_COLUMNS = ("experiment", "label", "task", "seeds", "intact", "zeroed",
                        "difference", "difference_low", "difference_high")


@dataclass(frozen=True)
class BranchRecords:
    """Every PTSL run's records: the norms (one row per network, layer and task) and the
    zeroing result (one row per task)."""

    norms: pd.DataFrame
    zeroed: pd.DataFrame


def collect_branches(params: Params, branches_dir: Path) -> BranchRecords:
    """Read and check the records of every run of ``runs.ptsl`` x ``seeds`` (the
    ``branches_ptsl`` stages' matrix) under ``branches_dir``; a missing one is a
    FileNotFoundError, a broken one a CorruptFileError naming it."""
    runs = [(exp, seed) for exp in params.runs.ptsl for seed in params.seeds]
    norms, zeroed = read_runs(branches_dir, runs)
    return BranchRecords(norms, zeroed)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (experiment, network, layer), in the frame's order: the task-mean ratio's mean over
    seeds, its smallest and largest seed, the seeds, and the means over seeds of the task-mean
    ``W_t`` norm and of its change from initialisation (columns experiment, network, layer,
    ratio_mean, ratio_min, ratio_max, seeds, task_weight_norm, task_weight_change)."""
    mean = frame[frame["task"] == MEAN_TASK]
    keys = ["experiment", "network", "layer"]
    grouped = mean.groupby(keys, sort=False)
    out = grouped["ratio"].agg(ratio_mean="mean", ratio_min="min", ratio_max="max")
    out["seeds"] = grouped["seed"].nunique()
    out["task_weight_norm"] = grouped["task_weight_norm"].mean()
    out["task_weight_change"] = grouped["task_weight_change"].mean()
    return out.reset_index()


def zeroing_table(zeroed: pd.DataFrame, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Per experiment (in the frame's order), its mean over tasks (task
    :data:`~ptsl.core.branch_records.MEAN_TASK`, first) then each task in benchmark order: the
    seeds, the intact and the zeroed success (means over seeds), and the mean of the per-seed
    differences intact minus zeroed with its 95% Student t interval (NaN below two seeds);
    columns :data:`ZEROED_TABLE_COLUMNS`. The two successes of a seed were measured on the same
    episodes, so the difference is paired by seed."""
    labels = labels or {}
    rows = []
    for exp, sub in zeroed.groupby("experiment", sort=False):
        per_seed = sub.groupby("seed", sort=True)[["intact_success", "zeroed_success"]]
        blocks = [(MEAN_TASK, per_seed.mean())]
        blocks += [(task, t.set_index("seed")[["intact_success", "zeroed_success"]].sort_index())
                   for task, t in sub.groupby("task", sort=False)]
        for task, by_seed in blocks:
            diff = (by_seed["intact_success"] - by_seed["zeroed_success"]).to_numpy(float)
            low, high = t_interval(diff)
            rows.append({"experiment": exp, "label": labels.get(exp, exp), "task": task,
                         "seeds": len(by_seed), "intact": float(by_seed["intact_success"].mean()),
                         "zeroed": float(by_seed["zeroed_success"].mean()),
                         "difference": float(diff.mean()), "difference_low": low,
                         "difference_high": high})
    return pd.DataFrame(rows, columns=list(ZEROED_TABLE_COLUMNS))


def _interval_text(r) -> str:
    if np.isnan(r.difference_low):
        return f"{r.difference:+.3f}"
    return f"{r.difference:+.3f} [{r.difference_low:+.3f}, {r.difference_high:+.3f}]"


def _reading(r) -> str:
    """One plain sentence on a row's mean over tasks."""
    head = (f"**{r.label}** ({r.seeds} seed(s)): success {r.intact:.3f} intact, {r.zeroed:.3f} "
            f"with the task branches zeroed; intact minus zeroed {_interval_text(r)}")
    if np.isnan(r.difference_low):
        return head + " (one seed: no interval)."
    if r.difference_low > 0:
        return head + ": the task branches raise its success."
    if r.difference_high < 0:
        return head + ": its success is higher without them."
    return head + ": the interval spans 0, so with or without them is not told apart."


def zeroing_markdown(table: pd.DataFrame, episodes: int) -> str:
    """The zeroing part of the results section: a sentence per PTSL row, then a table per row
    (the mean over tasks first, then every task)."""
    lines = ["**Is the task layer used?** Evaluation success of every PTSL agent (deterministic "
             f"policy, {episodes} episode(s) per task) intact and with every PTSL layer's task "
             "branch zeroed, the shared path alone, on the same episodes (the evaluate stage's "
             "environment, seeds and goals); each the mean over seeds, and the mean of the "
             f"per-seed differences intact minus zeroed with its {LEVEL:.0%} t interval "
             f"([data/{ZEROED_CSV_NAME}](data/{ZEROED_CSV_NAME})):", ""]
    means = table[table["task"] == MEAN_TASK]
    lines += [f"- {_reading(r)}" for r in means.itertuples()]
    for exp, sub in table.groupby("experiment", sort=False):
        lines += ["", f"| {sub['label'].iloc[0]} | intact | zeroed | intact − zeroed "
                      f"[{LEVEL:.0%} CI] |", "|---|---:|---:|---|"]
        for r in sub.itertuples():
            task = "**mean over tasks**" if r.task == MEAN_TASK else r.task
            lines.append(f"| {task} | {r.intact:.3f} | {r.zeroed:.3f} | {_interval_text(r)} |")
    return "\n".join(lines) + "\n"


def _ratio_range(norms: pd.DataFrame) -> str:
    ratios = summary(norms)["ratio_mean"].to_numpy(float)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return ""
    return (f" Averaged over tasks and seeds, a layer's task branch output is {ratios.min():.2g} "
            f"to {ratios.max():.2g} times its shared path's.")


def branches_markdown(records: BranchRecords, table: pd.DataFrame, episodes: int) -> str:
    """The results.md section: the norms (a sentence, the data file, the figure), then the
    zeroing result (:func:`zeroing_markdown`)."""
    return ("### PTSL's task branches\n\nFor every PTSL layer of every trained PTSL agent "
            "(actor and both Q networks), the task branch's output against the shared path's "
            "on the agent's own evaluation episodes, and the norms of the shared and "
            "task-specific weights, as the `branches_ptsl` stages recorded them "
            f"([data/{CSV_NAME}](data/{CSV_NAME})).{_ratio_range(records.norms)}\n\n"
            f"![PTSL task branches](figures/{FIGURE_NAME})\n\n"
            + zeroing_markdown(table, episodes))


#: The figure's columns of panels: frame column, y label.
_PANELS = (("ratio", "|task branch| / |S x + b|"),
           ("task_weight_norm", "mean |W_t| (Frobenius)"),
           ("task_weight_change", "mean |W_t - W_t at init|"))


def plot_branches(frame: pd.DataFrame,
                  labels: Mapping[str, str] | None = None) -> bytes:
    """Per network (a row of panels) and layer (x), one bar colour per experiment: the task
    branch's size against the shared path's (the ratio), the mean ``W_t`` norm and its change
    from initialisation, each the mean over tasks; bars the mean over seeds, each seed a point.
    As PNG.

    Non-finite ratios (a nonzero branch over an exactly zero shared path) are left out of the
    bars and points; the CSV keeps them.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from .figures import _colors, png_bytes

    mean = frame[frame["task"] == MEAN_TASK]
    if mean.empty:
        raise ValueError("no PTSL layer to plot")
    experiments = list(dict.fromkeys(mean["experiment"]))
    networks = list(dict.fromkeys(mean["network"]))
    colors = dict(zip(experiments, _colors(len(experiments))))
    labels = labels or {}
    width = 0.8 / len(experiments)
    fig = Figure(figsize=(14, 2.5 * len(networks) + 1.2), dpi=110, layout="constrained")
    axes = fig.subplots(len(networks), len(_PANELS), squeeze=False)
    for row, net in enumerate(networks):
        sub = mean[mean["network"] == net]
        layers = sorted(sub["layer"].unique())
        for col, (column, ylabel) in enumerate(_PANELS):
            ax = axes[row, col]
            for k, exp in enumerate(experiments):
                offset = (k - (len(experiments) - 1) / 2) * width
                run = sub[sub["experiment"] == exp]
                for layer in layers:
                    values = run.loc[run["layer"] == layer, column].to_numpy(dtype=float)
                    values = values[np.isfinite(values)]
                    if values.size == 0:
                        continue
                    ax.bar(layer + offset, values.mean(), width, color=colors[exp], alpha=0.75)
                    # Each seed a point: the spread over seeds, not only the mean, is the finding.
                    ax.plot(np.full(values.size, layer + offset), values, ls="none", marker="o",
                            ms=3, mfc="black", mec="none")
            ax.set_xticks(layers, [str(x) for x in layers])
            ax.set_xlabel(f"{net}: PTSL layer (0 input, {layers[-1]} output)", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.set_ylim(bottom=0)
            ax.tick_params(labelsize=8)
            ax.grid(axis="y", alpha=0.3)
    # One legend for every panel, below them: inside a panel it would hide bars.
    fig.legend([Patch(color=colors[e], alpha=0.75) for e in experiments],
               [labels.get(e, e) for e in experiments], loc="outside lower center",
               ncols=min(len(experiments), 6), fontsize=8)
    fig.suptitle("PTSL task branches on the evaluation episodes, means over tasks: bars the "
                 "mean over seeds, points the seeds", fontsize=10)
    return png_bytes(fig)


def branch_files(params: Params, records: BranchRecords
                 ) -> tuple[str, dict[str, tuple[bytes | str, str]]]:
    """The results.md section of ``records`` and its files, by path under a reports folder with
    what each is: ``data/branches.csv``, ``data/branches_zeroed.csv`` and
    ``figures/branches.png``. Without any PTSL run: "" and no file."""
    if records.zeroed.empty:
        return "", {}
    labels = {name: exp.label or name for name, exp in params.experiments.items()}
    table = zeroing_table(records.zeroed, labels)
    files = {f"figures/{FIGURE_NAME}": (plot_branches(records.norms, labels), "figure"),
             f"data/{CSV_NAME}": (records.norms.to_csv(index=False), "branch measurement"),
             f"data/{ZEROED_CSV_NAME}": (table.to_csv(index=False), "branch zeroing table")}
    return branches_markdown(records, table, params.evaluate.episodes), files


__all__ = ["BranchRecords", "branch_files", "collect_branches", "plot_branches", "summary",
           "zeroing_markdown", "zeroing_table"]
