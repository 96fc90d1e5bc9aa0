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
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..core.files import swap_in, write_atomic
from ..core.records import Metrics, run_id
from ..ops.params import Params, TableConfig, preset_matches
from .comparison import METRICS, Beside, beside, cell_text, mentioned, notes, sources_text
from .figures import plot_curves, plot_task_heatmap
from .inputs import RunRecords
from .published import Published
from .rollouts import Rollouts, write_videos
from .stats import scores_at, summarize_available

#: How each metric is measured, in a few words (docs/statistics.md says more).
METRIC_TEXT = {
    "evaluation": "evaluation success: the deterministic policy, success at any step of an "
                  "episode, mean over tasks",
    "training": "training success: the training episodes under the stochastic policy finished "
                "since the previous evaluation, success at any step, mean over tasks (empty "
                "where none finished)",
}
#: The curve column of each metric's mean over tasks.
MEAN_COLUMN = {"evaluation": "success", "training": "train_success"}
_STAT_FIELDS = ("iqm", "iqm_low", "iqm_high", "mean", "std", "final_mean", "best_mean")


def budget_caption(params: Params) -> str:
    name = params.budget if preset_matches(params) else f"{params.budget} (modified)"
    return (f"budget `{name}`: {params.train.steps:,} vector steps per task over seeds "
            f"{list(params.seeds)}; long runs to {params.train.long_steps:,} over seeds "
            f"{list(params.long_seeds)}; batch {params.sac.batch_size}")


def protocol_caption(params: Params) -> str:
    """The active protocol, named and spelled out."""
    env = params.env
    reward = f"{env.reward_version} reward functions" + (
        " divided by a running standard deviation" if env.normalize_reward else "")
    goals = ("one fixed goal per task (drawn by the seed)" if env.goals == "fixed"
             else "goals resampled from the 50 per task")
    text = (f"protocol `{params.protocol}`: Meta-World v3 tasks, {reward}, "
            f"{env.episode_length}-step episodes, {goals}, {params.train.eval_episodes} "
            "evaluation episode(s) per task")
    return text + "".join(f", {s}" for s in protocol_settings(params))


def protocol_settings(params: Params) -> list[str]:
    """The settings a researcher flips to match a published run, where they differ from the
    reference's (nothing under the reference protocol's defaults, so its captions stay)."""
    env, sac, train = params.env, params.sac, params.train
    out = []
    if env.eval_ends_at_success:
        out.append("each evaluation episode ending at success")
    if train.eval_stride != 1:
        out.append(f"evaluated every {train.eval_interval:,} vector steps")
    if sac.sizes_per_task:
        out.append(f"batch {sac.batch_size} and buffer {sac.buffer_capacity:,} per task")
    if sac.q_clip is not None:
        out.append(f"Q-values clipped at ±{sac.q_clip:g}")
    return out


def table_title(params: Params, table: TableConfig) -> str:
    """The table's title with the step it actually reports."""
    return f"{table.title} (reported at {params.table_step(table):,} vector steps per task)"


def _metric_stats(params: Params, records: RunRecords, name: str, seeds: tuple[int, ...],
                  step: int, metric: str, rng: np.random.Generator) -> tuple[dict, Any]:
    """One metric of one row: IQM with its interval, mean ± std over seeds (the primary kind),
    the means of both kinds, and the per-task mean over seeds of the primary kind."""
    final = scores_at(records.curves, name, seeds, step, "final", metric)
    best = scores_at(records.curves, name, seeds, step, "best", metric)
    head = final if params.report.primary == "final" else best
    stats = summarize_available(head, params.report.bootstrap_reps, rng)
    row = {f: None for f in _STAT_FIELDS}
    if stats is not None:
        row.update(iqm=stats.iqm, iqm_low=stats.iqm_low, iqm_high=stats.iqm_high,
                   mean=stats.mean, std=stats.std)
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
    value beside each.

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
            # The markdown shows every source of a cell; the CSV its first value and source.
            found = shown.cells.get((name, metric), [])
            row[f"published_{metric}"] = found[0][1].value if found else None
            row[f"published_{metric}_source"] = (shown.refs[found[0][0] - 1].name if found
                                                 else None)
            if metric == params.report.metric:
                per_task[name] = tasks
        rows.append(row)
    return pd.DataFrame(rows), per_task, shown


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "—" if pd.isna(x) else format(x, spec)


def _iqm_cell(r: Mapping[str, Any], metric: str) -> str:
    if pd.isna(r[f"{metric}_iqm"]):
        return "—"
    return (f"{r[f'{metric}_iqm']:.3f} [{r[f'{metric}_iqm_low']:.3f}, "
            f"{r[f'{metric}_iqm_high']:.3f}]")


def table_markdown(frame: pd.DataFrame, table: TableConfig, params: Params,
                   shown: Beside) -> str:
    """The table as GitHub markdown: the headline metric's column pair first, each metric
    beside its published value; the header says what each column measures and the notes under
    it where the published values come from."""
    head_metric, primary = params.report.metric, params.report.primary
    order = [head_metric, *[m for m in METRICS if m != head_metric]]
    other = "best" if primary == "final" else "final"
    other_label = "best so far" if other == "best" else "final"
    kind_text = "success at the step" if primary == "final" else "best success so far"
    labels = dict(zip(frame["experiment"], frame["label"]))
    header = (["row", "parameters", "seeds"]
              + [c for m in order for c in (f"{m} IQM {primary} [95% CI]", "published")]
              + [f"{head_metric} mean ± std {primary}", f"{head_metric} {other_label}"])
    lines = ["| " + " | ".join(header) + " |",
             "|---|---:|---:|" + "---|---:|" * len(order) + "---|---:|"]
    for r in frame.to_dict("records"):
        cells = [r["label"], f"{r['parameters']:,}", str(r["seeds"])]
        for m in order:
            cells += [_iqm_cell(r, m), cell_text(shown.cells.get((r["experiment"], m)),
                                                 shown.refs)]
        mean, std = r[f"{head_metric}_mean"], r[f"{head_metric}_std"]
        cells += ["—" if pd.isna(mean) else f"{mean:.3f} ± {std:.3f}",
                  _fmt(r[f"{head_metric}_{other}_mean"])]
        lines.append("| " + " | ".join(cells) + " |")
    step = int(frame["step"].iloc[0])
    seeds = params.table_seeds(table)
    intro = (f"Reported at {step:,} vector steps per task over seed(s) "
             f"{', '.join(map(str, seeds))}; "
             f"{protocol_caption(params)}. Headline: **{head_metric} success**, **{primary}** "
             f"({kind_text}); IQM over runs x tasks with a stratified bootstrap 95% confidence "
             "interval over seeds. Evaluation success: the deterministic policy; training "
             "success: the stochastic policy's training episodes since the previous "
             "evaluation (— where none finished).")
    return (f"#### {table_title(params, table)}\n\n{intro}\n\n" + "\n".join(lines) + "\n\n"
            + notes(shown, params, labels))


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
REPORT_DIRS = ("tables", "figures", "plots", "metrics", "videos")
_STAGING_PREFIX = ".aggregate-"


def write_reports(params: Params, records: RunRecords, published: Published,
                  out_dir: Path, videos: Mapping[str, Rollouts] | None = None) -> dict[str, Path]:
    """Write every report under ``out_dir``; returns the main ones.

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
        written = _build_reports(params, records, published, staging, videos)
        for name in REPORT_DIRS:  # an output with nothing in it is still made
            (staging / name).mkdir(parents=True, exist_ok=True)
        swap_in(staging, out_dir, (REPORT_FILE, *REPORT_DIRS))
    return {key: out_dir / path.relative_to(staging) for key, path in written.items()}


def _build_reports(params: Params, records: RunRecords, published: Published,
                   out_dir: Path, videos: Mapping[str, Rollouts] | None) -> dict[str, Path]:
    rng = np.random.default_rng(0)  # bootstrap draws: fixed so reports are reproducible
    metric, primary = params.report.metric, params.report.primary
    sections = [f"Generated by the `aggregate` stage; {budget_caption(params)}; "
                f"{protocol_caption(params)}. Every number is one of two metrics, named in "
                f"each column: {METRIC_TEXT['evaluation']}; {METRIC_TEXT['training']}. "
                f"Headline metric: {metric} success ({primary}).\n"]
    metrics: dict[str, dict] = {}
    written: dict[str, Path] = {}
    cited: list = []
    sheets = write_videos(params, videos or {}, out_dir)
    for tname, table in params.tables.items():
        frame, per_task, shown = table_frame(params, table, records, published, rng)
        cited += [s for s in mentioned(shown) if s not in cited]
        md = table_markdown(frame, table, params, shown)
        write_atomic(out_dir / "tables" / f"{tname}.md", md)
        write_atomic(out_dir / "tables" / f"{tname}.csv", frame.to_csv(index=False))
        step, seeds = params.table_step(table), params.table_seeds(table)
        title = table_title(params, table)
        sub = records.curves[(records.curves["step"] <= step)
                             & records.curves["seed"].isin(seeds)]
        labels = {n: params.experiments[n].label or n for n in table.rows}
        curves_png = out_dir / "figures" / f"{tname}_curves.png"
        tasks_png = out_dir / "figures" / f"{tname}_tasks.png"
        plot_curves(sub, list(table.rows), curves_png, f"{title}, {len(seeds)} seed(s)",
                    params.report.bootstrap_reps, rng, mark_step=step, labels=labels,
                    column=MEAN_COLUMN[metric], ylabel=f"{metric} success rate")
        matrix = np.stack([per_task[n][0] for n in table.rows])
        task_names = per_task[table.rows[0]][1]
        plot_task_heatmap(matrix, [labels[n] for n in table.rows], task_names, tasks_png,
                          f"{title}: per-task {metric} success ({primary})",
                          colorbar=f"{metric} success rate")
        rollouts = (f" ![{table.title} rollouts](figures/{sheets[tname].name})"
                    if tname in sheets else "")
        sections.append(md + f"\n![{table.title} curves](figures/{curves_png.name}) "
                        f"![{table.title} per task](figures/{tasks_png.name}){rollouts}\n")
        # The headline number of every table row: the headline metric's mean over seeds at the
        # table's step (`short` or `long`; the same in every table listing that row).
        for r in frame.to_dict("records"):
            value = r[f"{metric}_mean"]
            metrics.setdefault(r["experiment"], {})[table.at] = (
                None if pd.isna(value) else round(float(value), 4))
        write_atomic(out_dir / "plots" / "tables" / f"{tname}.csv",
                     table_plot_frame(params, table, records.curves).to_csv(index=False))
        written[f"{tname}_curves"] = curves_png
        written[f"{tname}_tasks"] = tasks_png
        if tname in sheets:
            written[f"{tname}_rollouts"] = sheets[tname]
    sections.append(sources_text(cited))
    written["results"] = out_dir / REPORT_FILE
    write_atomic(written["results"], "\n".join(sections))
    # One small file per experiment: `dvc metrics show` prints a row per experiment with its
    # `short` and `long` headline, and `dvc exp diff` lists what an experiment changed. The
    # statistics behind them (IQM, CI, std, per task, both metrics) stay in tables/*.csv.
    for exp, values in metrics.items():
        Metrics(**values).write(out_dir / "metrics" / f"{exp}.json")
    written["metrics"] = out_dir / "metrics"
    # One chart per run for `dvc plots show`, named by experiment and seed.
    for (exp, seed), _ in records.curves.groupby(["experiment", "seed"], sort=False):
        write_atomic(out_dir / "plots" / "runs" / f"{run_id(exp, seed)}.csv",
                     run_plot_frame(params, exp, seed, records.curves).to_csv(index=False))
    return written
