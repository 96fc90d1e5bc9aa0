"""Report figures: success curves with bootstrap bands, per-task success heatmaps and paired
contrasts (PNG)."""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
# The object-oriented Figure API needs no pyplot: no global figure registry and no backend switch,
# so these functions are safe to call from any process (saving a PNG uses the Agg renderer).
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ..core.files import write_atomic

_VERSION_SUFFIX = re.compile(r"-v\d+$")


def png_bytes(fig: Figure) -> bytes:
    """``fig`` rendered as PNG, in memory."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _save_png_atomic(fig: Figure, path: Path) -> None:
    """Render in memory, then write atomically: readers never see half a PNG."""
    write_atomic(path, png_bytes(fig), "figure")


def _label(experiment: str, i: int, labels: Mapping[str, str] | Sequence[str] | None) -> str:
    if labels is None:
        return experiment
    if isinstance(labels, Mapping):
        return labels.get(experiment, experiment)
    return labels[i]


def _colors(n: int) -> list:
    # Qualitative maps keep neighbouring lines distinguishable; tab20 only beyond ten lines.
    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def seed_mean_band(values: np.ndarray, reps: int, rng: np.random.Generator,
                   confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean over seeds and its percentile-bootstrap interval (resampling seeds with replacement).

    With one seed the interval collapses to the mean itself.
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        raise ValueError("no values to average")
    mean = float(v.mean())
    if v.size == 1:
        return mean, mean, mean
    means = v[rng.integers(0, v.size, size=(reps, v.size))].mean(axis=1)
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return mean, float(low), float(high)


def _check_curve_inputs(curves: pd.DataFrame, experiments: Sequence[str],
                        rng: np.random.Generator,
                        labels: Mapping[str, str] | Sequence[str] | None,
                        points: Sequence[tuple[str, int, float]]) -> None:
    """:func:`plot_curves`' arguments agree with each other and with ``curves``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if len(experiments) == 0:
        raise ValueError("no experiments to plot")
    if labels is not None and not isinstance(labels, Mapping) and len(labels) != len(experiments):
        raise ValueError(f"{len(labels)} labels for {len(experiments)} experiments")
    unknown = sorted({p[0] for p in points} - set(experiments))
    if unknown:
        raise ValueError(f"published points for experiments {unknown} not plotted here")
    present = set(curves["experiment"].unique())
    absent = [e for e in experiments if e not in present]
    if absent:
        raise ValueError(f"no curves for experiments {absent} (present: {sorted(present)})")


def _draw_curve(ax: Axes, run: pd.DataFrame, exp: str, column: str, label: str,
                color: tuple[float, ...], style: str, band_alpha: float, reps: int,
                rng: np.random.Generator) -> None:
    """One experiment's mean over seeds with its bootstrap band (``run``: its rows of the
    curves), or its legend entry alone where it has no value."""
    dup = run.duplicated(["seed", "step"])
    if dup.any():
        bad = run.loc[dup, ["seed", "step"]].iloc[0]
        raise ValueError(f"experiment {exp!r} seed {bad['seed']} has more than one "
                         f"evaluation at step {bad['step']}")
    run = run[run[column].notna()]
    if run.empty:  # e.g. no training episode finished yet: say so rather than draw nothing
        ax.plot([], [], color=color, ls=style, lw=1.8, label=f"{label} (no values)")
        return
    # Steps where only some seeds have a value are averaged over the seeds that do.
    by_step = run.pivot(index="step", columns="seed", values=column).sort_index()
    stats = np.array([seed_mean_band(row, reps, rng) for row in by_step.to_numpy()])
    steps = by_step.index.to_numpy()
    ax.plot(steps, stats[:, 0], color=color, ls=style, lw=1.8, label=label)
    ax.fill_between(steps, stats[:, 1], stats[:, 2], color=color, alpha=band_alpha, lw=0)


def plot_curves(curves: pd.DataFrame, experiments: Sequence[str], title: str,
                reps: int, rng: np.random.Generator, mark_step: int | None = None,
                labels: Mapping[str, str] | Sequence[str] | None = None,
                column: str = "success", ylabel: str = "evaluation success rate",
                points: Sequence[tuple[str, int, float]] = ()) -> bytes:
    """Mean success over seeds per step, one line per experiment, with 95% bands, as PNG.

    ``curves`` is ``report.collect(...).curves`` (columns experiment, seed, step, and
    ``column``: ``success``, or ``train_success`` whose empty rows, where no training episode
    finished, are left out). The band is a percentile bootstrap over seeds of the mean at each
    step (``reps`` replicates drawn from ``rng``). ``mark_step`` draws a dashed vertical line at
    the reported step. ``labels`` renames experiments in the legend (a mapping, or a sequence
    aligned with ``experiments``). An experiment without any value is named in the legend as
    such. ``points`` are published ``(experiment, step, value)`` points of the same metric,
    drawn as diamonds in their experiment's colour.
    """
    _check_curve_inputs(curves, experiments, rng, labels, points)
    # A legend beside the axes stays readable with many lines instead of covering the curves.
    outside = len(experiments) > 4
    fig = Figure(figsize=(9.5 if outside else 7, 4.2), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    band_alpha = 0.18 if len(experiments) <= 4 else 0.1  # overlapping bands stay see-through
    colors = dict(zip(experiments, _colors(len(experiments))))
    for i, (exp, color) in enumerate(colors.items()):
        _draw_curve(ax, curves[curves["experiment"] == exp], exp, column,
                    _label(exp, i, labels), color, "-" if i < 10 else "--", band_alpha, reps, rng)
    for exp, step, value in points:
        ax.plot([step], [value], ls="none", marker="D", ms=6, mfc=colors[exp], mec="black",
                mew=0.8, zorder=5)
    if points:  # one legend entry for all, in no row's colour
        ax.plot([], [], ls="none", marker="D", ms=6, mfc="white", mec="black", mew=0.8,
                label="published, same metric (in its row's colour)")
    if mark_step is not None:
        ax.axvline(mark_step, color="0.3", ls="--", lw=1.0, label=f"reported step ({mark_step:,})")
    ax.set_xlabel("vector steps per task")
    # Plain thousands (1,000,000) rather than matplotlib's 1e6 offset text for long budgets.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylabel(ylabel)
    # A small margin keeps lines at exactly 0 or 1 from being hidden by the axes' spines.
    ax.set_ylim(-0.02, 1.02)
    # Long titles (a study's, with its reported step and seeds) wrap instead of running off.
    ax.set_title(textwrap.fill(title, 75 if outside else 60), fontsize=10)
    ax.grid(alpha=0.3)
    if outside:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize=8, loc="upper left")
    return png_bytes(fig)


class ContrastRow(NamedTuple):
    """One paired contrast as :func:`plot_contrasts` draws it."""

    label: str                      # "CARE+PTSL − CARE"
    differences: Sequence[float]    # one per seed
    interval: tuple[float, float]   # of their mean (NaN: fewer than two pairs)
    published: float | None = None  # the published difference, where a source gives both rows
    primary: bool = False


def _draw_contrast(ax: Axes, row: ContrastRow, y: float,
                   once: Callable[[str], str | None]) -> None:
    """One contrast on line ``y``: its seeds' differences, their mean with its interval and the
    published difference (``once`` names each kind of mark in the legend once)."""
    d = np.asarray(row.differences, dtype=float)
    if d.size == 0:  # e.g. no training episode finished by the step in one of the rows
        ax.text(0.5, y, "no seed with both runs' values", transform=ax.get_yaxis_transform(),
                ha="center", va="center", fontsize=8, color="0.3")
        return
    # The seeds spread over a band around the line, in seed order, so equal values show.
    offsets = np.linspace(-0.18, 0.18, d.size) if d.size > 1 else np.zeros(1)
    ax.plot(d, y + offsets, ls="none", marker="o", ms=5, mfc="tab:blue", mec="none",
            alpha=0.6, zorder=2, label=once("a seed's difference"))
    mean = float(d.mean())
    lo, hi = row.interval
    if np.isfinite(lo) and np.isfinite(hi):
        ax.errorbar([mean], [y], xerr=[[mean - lo], [hi - mean]], fmt="s", ms=6,
                    color="black", capsize=5, lw=1.6, zorder=3,
                    label=once("mean, 95% t interval"))
    else:
        ax.plot([mean], [y], ls="none", marker="s", ms=6, color="black", zorder=3,
                label=once("mean (one pair: no interval)"))
    if row.published is not None:
        ax.plot([row.published], [y], ls="none", marker="x", ms=9, mew=2, color="tab:red",
                zorder=4, label=once("published difference"))


def plot_contrasts(rows: Sequence[ContrastRow], title: str, xlabel: str) -> bytes:
    """Paired contrasts, one line each, top to bottom in ``rows``' order: every seed's
    difference as a dot, their mean with its interval as a bar, no difference as a vertical
    line, and the published difference as a red cross where there is one. The primary contrast
    is named so on its line; a contrast no seed has both runs' values for says so there."""
    if not rows:
        raise ValueError("no contrasts to plot")
    n = len(rows)
    fig = Figure(figsize=(7.5, 1.3 + 0.75 * n), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    ax.axvline(0.0, color="0.3", lw=1.0, zorder=1)
    named: set[str] = set()

    def once(label: str) -> str | None:  # each kind of mark in the legend once
        if label in named:
            return None
        named.add(label)
        return label

    for i, row in enumerate(rows):
        _draw_contrast(ax, row, n - 1 - i, once)
    ax.set_yticks(np.arange(n)[::-1],
                  [textwrap.fill(r.label + (" (primary)" if r.primary else ""), 32)
                   for r in rows], fontsize=8)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel(textwrap.fill(xlabel, 80), fontsize=9)
    ax.set_title(textwrap.fill(title, 70), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if named:
        fig.legend(fontsize=7, loc="outside lower center", ncol=3, frameon=False)
    return png_bytes(fig)


def short_task_name(name: str) -> str:
    """``success/pick-place-v3``, ``train_success/pick-place-v3`` or ``pick-place-v3`` ->
    ``pick-place``."""
    return _VERSION_SUFFIX.sub("", name.removeprefix("train_success/").removeprefix("success/"))


def plot_task_heatmap(matrix: np.ndarray, row_labels: Sequence[str], task_names: Sequence[str],
                      title: str, colorbar: str = "success rate") -> bytes:
    """Per-task success heatmap: one row per table row (experiment), one column per task.

    ``matrix[i, j]`` is the mean success over seeds of row ``i`` on task ``j``, drawn on a fixed
    0..1 colour scale (NaN cells, e.g. no training episode finished, are grey); ``colorbar``
    names the metric. Cells carry their value when there are at most 12 tasks; with more (MT50)
    the figure widens so every task label stays readable.
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"matrix must be a non-empty rows x tasks array, got shape {m.shape}")
    if m.shape != (len(row_labels), len(task_names)):
        raise ValueError(f"matrix shape {m.shape} does not match {len(row_labels)} row labels "
                         f"x {len(task_names)} task names")
    n_rows, n_cols = m.shape
    annotate = n_cols <= 12
    names = [short_task_name(t) for t in task_names]
    # Size the figure from the cell grid plus room for the labels (inches, ~0.07 per character),
    # so 50 narrow columns get as much room as 10 wide ones instead of being squeezed.
    cell_w, cell_h = (0.75, 0.45) if annotate else (0.3, 0.32)
    label_w = 0.07 * max(len(s) for s in row_labels) + 0.3
    label_h = 0.055 * max(len(s) for s in names) + 0.3
    width = max(5.0, label_w + cell_w * n_cols + 1.2)
    height = max(2.5, label_h + cell_h * n_rows + 0.7)
    fig = Figure(figsize=(width, height), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["viridis"].with_extremes(bad="0.85")
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto",
                   interpolation="nearest")
    ax.set_xticks(np.arange(n_cols), names, rotation=60, ha="right", rotation_mode="anchor",
                  fontsize=8)
    ax.set_yticks(np.arange(n_rows), list(row_labels), fontsize=8)
    ax.tick_params(length=0)
    if annotate:
        for (i, j), v in np.ndenumerate(m):
            if np.isfinite(v):
                # viridis is dark below ~0.6: white text there, black on the light end.
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if v < 0.6 else "black")
    ax.set_title(title, fontsize=10)
    cbar = fig.colorbar(im, ax=ax, fraction=0.05 if annotate else 0.02, pad=0.01)
    cbar.set_label(colorbar, fontsize=8)
    cbar.ax.tick_params(labelsize=7)
    return png_bytes(fig)


def plot_contact_sheet(rows: Sequence[tuple[str, Sequence[tuple[str, np.ndarray, bool]]]],
                       title: str, columns: int = 10) -> bytes:
    """Rollout stills: one block per table row, one tile per task (the episode's last frame).

    ``rows`` holds ``(row label, [(task name, frame (H, W, 3) uint8, success), ...])``; a block
    wraps after ``columns`` tiles (MT50: five lines of ten). A tile's caption is the short task
    name, marked ``✓`` when the episode succeeded.
    """
    if not rows or any(not tiles for _, tiles in rows):
        raise ValueError("every row of a contact sheet needs at least one frame")
    cols = min(columns, max(len(tiles) for _, tiles in rows))
    lines = [-(-len(tiles) // cols) for _, tiles in rows]  # ceil: tile lines per block
    tile = 1.1  # inches per tile, caption included
    fig = Figure(figsize=(tile * cols, 0.4 + sum(tile * n + 0.3 for n in lines)), dpi=100,
                 layout="constrained")
    fig.suptitle(title, fontsize=10)
    blocks = fig.subfigures(len(rows), 1, height_ratios=[tile * n + 0.3 for n in lines],
                            squeeze=False)[:, 0]
    for block, (label, tiles), n in zip(blocks, rows, lines):
        block.suptitle(label, fontsize=9, x=0.01, ha="left")
        axes = block.subplots(n, cols, squeeze=False)
        for k, ax in enumerate(axes.flat):
            ax.set_axis_off()
            if k < len(tiles):
                name, frame, success = tiles[k]
                ax.imshow(frame, interpolation="nearest")
                ax.set_title(short_task_name(name) + (" ✓" if success else ""), fontsize=6.5,
                             color="tab:green" if success else "0.2", pad=2)
    return png_bytes(fig)
