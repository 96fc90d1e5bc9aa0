"""Runs -> the paper's tables (markdown, CSV), figures (curves with confidence bands, per-task
heatmaps, rollout contact sheets), DVC plot data and metrics, with published numbers beside ours.

Every table reads the runs' curves at its reported step, on both metrics: evaluation success
(the deterministic evaluations) and training success (the training episodes of the window
before the step). ``final`` is the value at that step, ``best`` the best so far;
``report.primary`` picks the kind and ``report.metric`` the headline metric (first column pair,
curves, heatmap, metrics JSON). Published values stand beside the column of their metric
(:mod:`ptsl.report.comparison`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.files import json_text, swap_in, write_atomic
from ..core.records import Metrics, run_id
from ..ops.params import Params, TableConfig
from .branches import BranchRecords, branch_files
from .comparison import METRICS, Beside, beside, earlier_columns, published_elsewhere
from .contrasts import contrasts_frame, contrasts_markdown, learned_tasks, paired_contrasts
from .datafiles import data_files
from .figures import ContrastRow, plot_contrasts, plot_curves, plot_task_heatmap
from .inputs import RunRecords
from .markdown import TableReport, results_markdown, table_markdown, table_title
from .protocol_record import protocol_record
from .published import Published
from .rollouts import Rollouts, write_videos
from .source_way import as_published, run_range
from .stats import scores_at, summarize_available

#: The curve column of each metric's mean over tasks.
MEAN_COLUMN = {"evaluation": "success", "training": "train_success"}
_STAT_FIELDS = ("iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high", "std",
                "final_mean", "best_mean")


def _metric_stats(params: Params, records: RunRecords, name: str, seeds: tuple[int, ...],
                  step: int, metric: str, rng: np.random.Generator) -> tuple[dict, Any]:
    """One metric of one row: IQM and mean over seeds with their intervals, and the std (the
    primary kind), the means of both kinds, and the per-task mean over seeds of the primary
    kind."""
    final = scores_at(records.curves, name, seeds, step, "final", metric)
    best = scores_at(records.curves, name, seeds, step, "best", metric)
    head = final if params.report.primary == "final" else best
    stats = summarize_available(head, params.report.bootstrap_reps, rng)
    row = {f: None for f in _STAT_FIELDS}
    if stats is not None:
        row.update(iqm=stats.iqm, iqm_low=stats.iqm_low, iqm_high=stats.iqm_high,
                   mean=stats.mean, mean_low=stats.mean_low, mean_high=stats.mean_high,
                   std=stats.std)
    for kind, scores in (("final_mean", final), ("best_mean", best)):
        per_run = np.asarray(scores.values, dtype=float).mean(axis=1)
        row[kind] = float(np.nanmean(per_run)) if not np.isnan(per_run).all() else None
    values = np.asarray(head.values, dtype=float)
    per_task = (np.nanmean(values[~np.isnan(values).all(axis=1)], axis=0)
                if not np.isnan(values).all() else np.full(values.shape[1], np.nan))
    return {f"{metric}_{k}": v for k, v in row.items()}, (per_task, head.tasks)


def table_frame(params: Params, table: TableConfig, records: RunRecords, published: Published,
                rng: np.random.Generator) -> tuple[pd.DataFrame, dict, Beside]:
    """One table: a row per experiment with both metrics, their statistics and the published
    value beside each, with ours computed the way its source computed it.

    Also returns each row's per-task mean over seeds of the headline metric (for the heatmap)
    and the published values shown (for the notes under the table).
    """
    step, seeds = params.table_step(table), params.table_seeds(table)
    shown = beside(params, table, published)
    rows, per_task = [], {}
    for name in table.rows:
        exp = params.experiments[name]
        params_count = records.evals.loc[records.evals["experiment"] == name, "parameter_count"]
        row = {"experiment": name, "label": exp.label or name, "method": exp.method,
               "parameters": int(params_count.iloc[0]), "seeds": len(seeds), "step": step,
               "metric": params.report.metric, "primary": params.report.primary}
        for metric in METRICS:
            stats, tasks = _metric_stats(params, records, name, seeds, step, metric, rng)
            row.update(stats)
            row.update(_published_cell(shown, records.curves, name, seeds, step, metric))
            if metric == params.report.metric:
                per_task[name] = tasks
        rows.append(row)
    _ours_elsewhere(shown, records.curves, seeds, step)
    _earlier_step_columns(shown, rows)
    return pd.DataFrame(rows), per_task, shown


def _published_cell(shown: Beside, curves: pd.DataFrame, name: str, seeds: Sequence[int],
                    step: int, metric: str) -> dict[str, Any]:
    """Row ``name``'s published columns of ``metric``: ours computed as each source of the cell
    computed its own (added to ``shown``), and the first source's value beside it."""
    found = shown.cells.get((name, metric), [])
    for ref, _ in found:
        stat = shown.refs[ref - 1].statistic
        shown.ours[(name, metric, ref)] = as_published(
            curves, name, seeds, step, metric, stat.run_score, stat.over_seeds)
        spread = run_range(curves, name, seeds, step, metric, stat.run_score)
        if spread is not None:
            shown.ranges[(name, metric, ref)] = spread
    # The markdown shows every source of a cell; the CSV its first value and source.
    first = shown.refs[found[0][0] - 1] if found else None
    # Its runs' lowest and highest value (where a single run of ours falls).
    spread = shown.ranges.get((name, metric, found[0][0])) if found else None
    return {f"published_{metric}": found[0][1].value if found else None,
            f"published_{metric}_source": first.name if first else None,
            f"published_{metric}_statistic": first.statistic.short if first else None,
            f"{metric}_as_published": shown.ours[(name, metric, found[0][0])] if found else None,
            f"{metric}_as_published_min": spread[0] if spread else None,
            f"{metric}_as_published_max": spread[1] if spread else None}


def _ours_elsewhere(shown: Beside, curves: pd.DataFrame, seeds: Sequence[int],
                    step: int) -> None:
    """The source's values at earlier steps of the same runs (a paper's curve part-way), with
    ours the source's way (added to ``shown``) where every run of the row was evaluated at that
    step."""
    for source, name, value in shown.elsewhere:
        if value.steps <= step and _evaluated_at(curves, name, seeds, value.steps):
            shown.ours_elsewhere[(source.name, name, value.steps)] = as_published(
                curves, name, seeds, value.steps, source.metric,
                source.statistic.run_score, source.statistic.over_seeds)
            spread = run_range(curves, name, seeds, value.steps, source.metric,
                               source.statistic.run_score)
            if spread is not None:
                shown.ranges_elsewhere[(source.name, name, value.steps)] = spread


def _earlier_step_columns(shown: Beside, rows: list[dict]) -> None:
    """The earlier steps the markdown gives columns of their own, added to the CSV's ``rows``
    too (as for the table's step: the first source of each metric and step)."""
    columns = earlier_columns(shown)
    for row in rows:
        for ref, at in columns:
            source = shown.refs[ref - 1]
            if f"published_{source.metric}_at_{at}" in row:
                continue
            found = published_elsewhere(shown, source, row["experiment"], at)
            row[f"published_{source.metric}_at_{at}"] = found.value if found else None
            row[f"{source.metric}_as_published_at_{at}"] = shown.ours_elsewhere.get(
                (source.name, row["experiment"], at))


def _evaluated_at(curves: pd.DataFrame, experiment: str, seeds: Sequence[int], step: int) -> bool:
    """Whether every one of ``seeds``' runs of ``experiment`` has an evaluation at ``step``."""
    at = curves[(curves["experiment"] == experiment) & (curves["step"] == step)]
    return set(seeds) <= set(at["seed"])


def published_points(shown: Beside, metric: str, step: int) -> list[tuple[str, int, float]]:
    """The published ``(experiment, step, value)`` points of ``metric`` up to ``step`` among a
    table's published values (beside ours and elsewhere), for its curves figure."""
    points = [(name, v.steps, v.value) for (name, m), found in shown.cells.items() if m == metric
              for _, v in found]
    points += [(name, v.steps, v.value) for source, name, v in shown.elsewhere
               if source.metric == metric and v.steps <= step]
    return sorted(set(points))


def mean_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and std of evaluation success over seeds at every evaluated step."""
    g = curves.groupby(["experiment", "step"], sort=False)["success"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    return out.rename(columns={"mean": "success", "std": "success_std", "count": "seeds"}).fillna(0.0)


def table_plot_frame(params: Params, table: TableConfig, curves: pd.DataFrame) -> pd.DataFrame:
    """DVC plot data of one table: a line per row (mean evaluation success over the table's
    seeds) up to its step.

    Long format (``title, row, step, success, success_std, seeds``): the project's ``rows``
    template colours by ``row``, and the offline page titles the chart from ``title``.
    """
    step, seeds = params.table_step(table), params.table_seeds(table)
    sub = curves[(curves["step"] <= step) & curves["seed"].isin(seeds)
                 & curves["experiment"].isin(table.rows)]
    means = mean_curves(sub)
    means["row"] = means["experiment"].map(lambda n: params.experiments[n].label or n)
    means["title"] = f"{table_title(params, table)}: mean over {len(seeds)} seed(s)"
    return means[["title", "row", "step", "success", "success_std", "seeds"]]


def run_plot_frame(params: Params, experiment: str, seed: int,
                   curves: pd.DataFrame) -> pd.DataFrame:
    """DVC plot data of one run: its evaluation success and return, named by experiment and
    seed."""
    run = curves[(curves["experiment"] == experiment) & (curves["seed"] == seed)]
    label = params.experiments[experiment].label or experiment
    out = run[["step", "success", "return"]].copy()
    out.insert(0, "row", label)
    out.insert(0, "title", f"{label}: {run_id(experiment, seed)}")
    out["seeds"] = 1
    return out


#: What the aggregate stage writes under its output folder (its DVC outputs): a file and folders.
REPORT_FILE = "results.md"
REPORT_DIRS = ("tables", "figures", "plots", "metrics", "videos", "data")
_STAGING_PREFIX = ".aggregate-"


#: The files the report builders make, written in one place (:func:`write_reports`): each
#: file's path under the reports folder, its contents and what it is (named if its write fails).
Files = dict[str, tuple[bytes | str, str]]


def write_reports(params: Params, records: RunRecords, published: Published,
                  out_dir: Path, videos: Mapping[str, Rollouts] | None = None,
                  pins: Mapping[str, str] | None = None,
                  branches: BranchRecords | None = None,
                  versus_runs: Mapping[str, pd.DataFrame] | None = None) -> dict[str, Path]:
    """Write every report under ``out_dir``; returns the main ones. ``pins``: the pinned
    package versions the protocol record names (requirements/compute.txt); ``branches``: the
    PTSL runs' task-branch records (:func:`ptsl.report.branches.collect_branches`), reported
    where given; ``versus_runs``: each study a table's ``versus`` names, its runs in the
    curves' shape (:func:`ptsl.report.versus.read_runs`).

    The reports are built in a staging folder inside ``out_dir`` and then each output
    (:data:`REPORT_FILE`, :data:`REPORT_DIRS`) is swapped into place whole (files of a table or run that is gone go
    with the old folder). A failure while building leaves ``out_dir`` as it was.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f"{_STAGING_PREFIX}*"):  # left by a killed run
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=_STAGING_PREFIX) as tmp:
        staging = Path(tmp) / "new"
        files: Files = {}
        written = _build_reports(params, records, published, staging, videos, pins, branches,
                                 versus_runs, files)
        for path, (data, role) in files.items():
            write_atomic(staging / path, data, role)
        for name in REPORT_DIRS:  # an output with nothing in it is still made
            (staging / name).mkdir(parents=True, exist_ok=True)
        swap_in(staging, out_dir, (REPORT_FILE, *REPORT_DIRS))
    return {key: out_dir / path for key, path in written.items()}


def _versus(params: Params, tname: str, table: TableConfig, records: RunRecords,
            other: pd.DataFrame, labels: Mapping[str, str], files: Files) -> tuple[str, str]:
    """The table's rows beside the other study's runs of them (``other``, in the curves' shape;
    :mod:`ptsl.report.versus`): its Markdown and its figure's path, the CSV and figure added to
    ``files``."""
    from .versus import plot_versus, versus, versus_frame, versus_markdown

    v, metric, step = table.versus, params.report.metric, params.table_step(table)
    view = versus(params, table, records.curves, other)
    files[f"tables/{tname}_versus.csv"] = (versus_frame(view, labels).to_csv(index=False),
                                           "output")
    png = f"figures/{tname}_versus.png"
    files[png] = (plot_versus(view, labels, v.this, v.other, f"{table_title(params, table)}: "
                              f"{v.setting}, {v.this} against {v.other} (study {v.study})",
                              f"{metric} success at {step:,} vector steps per task"), "figure")
    return versus_markdown(view, labels, v.this, v.other, v.setting, v.study, metric, step), png


def _contrasts(params: Params, tname: str, table: TableConfig, records: RunRecords,
               shown: Beside, task_names: Sequence[str], labels: Mapping[str, str],
               files: Files) -> tuple[str, list[ContrastRow]]:
    """The table's paired contrasts (:mod:`ptsl.report.contrasts`): their Markdown and their
    rows as the figure draws them (:func:`_table_figures`), the CSV added to ``files``."""
    metric, step, seeds = params.report.metric, params.table_step(table), params.table_seeds(table)
    contrasts = paired_contrasts(params, table, records.curves, shown)
    contrasts_md = contrasts_markdown(
        contrasts, labels, learned_tasks(records.curves, table.rows, seeds, step),
        task_names, metric, step, table.equivalence)
    files[f"tables/{tname}_contrasts.csv"] = (
        contrasts_frame(contrasts, labels).to_csv(index=False), "output")
    return contrasts_md, [ContrastRow(f"{labels[c.row]} − {labels[c.minus]}", c.differences,
                                      c.interval(), c.published, c.primary) for c in contrasts]


def _table_figures(params: Params, tname: str, table: TableConfig, records: RunRecords,
                   shown: Beside, per_task: Mapping[str, Any], labels: Mapping[str, str],
                   contrasts: Sequence[ContrastRow] | None, rng: np.random.Generator,
                   files: Files) -> dict[str, str]:
    """The table's curves (bands drawn from ``rng``), per-task heatmap and, where it has them,
    paired contrasts, added to ``files``; returns their paths by figure (``curves``, ``tasks``,
    ``contrasts``)."""
    metric, primary = params.report.metric, params.report.primary
    step, seeds = params.table_step(table), params.table_seeds(table)
    title = table_title(params, table)
    sub = records.curves[(records.curves["step"] <= step)
                         & records.curves["seed"].isin(seeds)]
    points = published_points(shown, metric, step)
    matrix = np.stack([per_task[n][0] for n in table.rows])
    task_names = per_task[table.rows[0]][1]
    figures = {"curves": f"figures/{tname}_curves.png", "tasks": f"figures/{tname}_tasks.png"}
    files[figures["curves"]] = (plot_curves(
        sub, list(table.rows), f"{title}, {len(seeds)} seed(s)", params.report.bootstrap_reps,
        rng, mark_step=step, labels=labels, column=MEAN_COLUMN[metric],
        ylabel=f"{metric} success rate", points=points), "figure")
    files[figures["tasks"]] = (plot_task_heatmap(
        matrix, [labels[n] for n in table.rows], task_names,
        f"{title}: per-task {metric} success ({primary})", colorbar=f"{metric} success rate"),
        "figure")
    if contrasts is not None:
        figures["contrasts"] = f"figures/{tname}_contrasts.png"
        files[figures["contrasts"]] = (plot_contrasts(
            contrasts, f"{title}: paired contrasts, {len(seeds)} seed(s)",
            f"difference in {metric} success at {step:,} vector steps per task "
            "(each run's mean over tasks, paired by seed)"), "figure")
    return figures


def _table_report(params: Params, tname: str, table: TableConfig, records: RunRecords,
                  published: Published, rng: np.random.Generator, sheets: Mapping[str, str],
                  versus_runs: Mapping[str, pd.DataFrame] | None,
                  written: dict[str, Path], files: Files) -> TableReport:
    """One table's files (Markdown, CSV, figures, plot data), added to ``files`` and its figures
    to ``written`` (paths under the reports folder); returns its section of results.md."""
    frame, per_task, shown = table_frame(params, table, records, published, rng)
    labels = {n: params.experiments[n].label or n for n in table.rows}
    contrasts_md, contrast_rows = "", None
    if table.contrasts:
        contrasts_md, contrast_rows = _contrasts(params, tname, table, records, shown,
                                                 per_task[table.rows[0]][1], labels, files)
    md = table_markdown(frame, table, params, shown)
    md += f"\n{contrasts_md}" if contrasts_md else ""
    if table.versus is not None:
        if table.versus.study not in (versus_runs or {}):
            raise ValueError(f"tables.{tname}.versus: study {table.versus.study!r}'s runs "
                             "were not read (pipeline/aggregate.py reads them)")
        versus_md, versus_png = _versus(params, tname, table, records,
                                        versus_runs[table.versus.study], labels, files)
        md += (f"\n{versus_md}\n![{table.title}, {table.versus.setting}]"
               f"({versus_png})\n")
        written[f"{tname}_versus"] = Path(versus_png)
    files[f"tables/{tname}.md"] = (md, "output")
    files[f"tables/{tname}.csv"] = (frame.to_csv(index=False), "output")
    figures = _table_figures(params, tname, table, records, shown, per_task, labels,
                             contrast_rows, rng, files)
    written.update({f"{tname}_{figure}": Path(path) for figure, path in figures.items()})
    contrasts_fig = (f" ![{table.title} paired contrasts]({figures['contrasts']})"
                     if "contrasts" in figures else "")
    rollouts = (f" ![{table.title} rollouts]({sheets[tname]})"
                if tname in sheets else "")
    files[f"plots/tables/{tname}.csv"] = (
        table_plot_frame(params, table, records.curves).to_csv(index=False), "output")
    if tname in sheets:
        written[f"{tname}_rollouts"] = Path(sheets[tname])
    return TableReport(
        tname, table, frame, shown, md + f"\n![{table.title} curves]({figures['curves']}) "
        f"![{table.title} per task]({figures['tasks']}){contrasts_fig}{rollouts}\n",
        Path(figures["curves"]).name, contrasts_md)


def _build_reports(params: Params, records: RunRecords, published: Published,
                   out_dir: Path, videos: Mapping[str, Rollouts] | None,
                   pins: Mapping[str, str] | None,
                   branches: BranchRecords | None,
                   versus_runs: Mapping[str, pd.DataFrame] | None,
                   files: Files) -> dict[str, Path]:
    """Copy the rollout videos under ``out_dir``; add every other report (their contact sheets
    too) to ``files``. Returns the main reports' paths under the reports folder."""
    rng = np.random.default_rng(0)  # bootstrap draws: fixed so reports are reproducible
    reports: list[TableReport] = []
    metrics: dict[str, dict] = {}
    written: dict[str, Path] = {}
    sheets = write_videos(params, videos or {}, out_dir, files)
    for tname, table in params.tables.items():
        report = _table_report(params, tname, table, records, published, rng, sheets,
                               versus_runs, written, files)
        reports.append(report)
        # The headline number of every table row: the headline metric's mean over seeds at the
        # table's step (`short` or `long`; the same in every table listing that row).
        for r in report.frame.to_dict("records"):
            value = r[f"{params.report.metric}_mean"]
            metrics.setdefault(r["experiment"], {})[table.at] = (
                None if pd.isna(value) else round(float(value), 4))
    # One chart per run for `dvc plots show`, named by experiment and seed.
    for (exp, seed), _ in records.curves.groupby(["experiment", "seed"], sort=False):
        files[f"plots/runs/{run_id(exp, seed)}.csv"] = (
            run_plot_frame(params, exp, seed, records.curves).to_csv(index=False), "output")
    section, branch_outputs = (branch_files(params, branches) if branches is not None
                               else ("", {}))
    files.update(branch_outputs)
    written["results"] = Path(REPORT_FILE)
    files[REPORT_FILE] = (results_markdown(params, reports, section), "output")
    # One small file per experiment: `dvc metrics show` prints a row per experiment with its
    # `short` and `long` headline, and `dvc exp diff` lists what an experiment changed. The
    # statistics behind them (IQM, CI, std, per task, both metrics) stay in tables/*.csv.
    for exp, values in metrics.items():
        files[f"metrics/{exp}.json"] = (json_text(Metrics(**values).model_dump(
            by_alias=True, exclude_none=True)), Metrics.ROLE)
    written["metrics"] = Path("metrics")
    # The data behind the tables, for other tools: the long CSV, an .npz per table and the
    # protocol record (docs/statistics.md, "Data files").
    for name, data in data_files(params, records).items():
        files[f"data/{name}"] = (data, "output")
    files["data/protocol.json"] = (json_text(protocol_record(params, pins or {})), "output")
    written["data"] = Path("data")
    return written
