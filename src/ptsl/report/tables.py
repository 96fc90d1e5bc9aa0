"""Runs -> the paper's tables (markdown, CSV), figures (curves with confidence bands, per-task
heatmaps, rollout contact sheets), DVC plot data and metrics, with published numbers beside ours.

Every table reads the runs' evaluation curves at its reported step: ``final`` is the success at
that step, ``best`` the best evaluation so far; ``report.primary`` picks the headline one.
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
from .figures import plot_curves, plot_task_heatmap
from .inputs import Published, RunRecords
from .rollouts import Rollouts, write_videos
from .stats import scores_at, summarize


def budget_caption(params: Params) -> str:
    name = params.budget if preset_matches(params) else f"{params.budget} (modified)"
    return (f"budget `{name}`: {params.train.steps:,} vector steps per task over seeds "
            f"{list(params.seeds)}; long runs to {params.train.long_steps:,} over seeds "
            f"{list(params.long_seeds)}; batch {params.sac.batch_size}")


def table_frame(params: Params, table: TableConfig, records: RunRecords,
                published: Published, rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    """One table: a row per experiment with both metrics, statistics and the published value.

    Also returns each row's per-task mean success under the primary metric (for the heatmap).
    """
    step, seeds = params.table_step(table), params.table_seeds(table)
    primary = params.report.primary
    rows, per_task = [], {}
    for name in table.rows:
        exp = params.experiments[name]
        final = scores_at(records.curves, name, seeds, step, "final")
        best = scores_at(records.curves, name, seeds, step, "best")
        headline = final if primary == "final" else best
        head = summarize(headline.values, params.report.bootstrap_reps, rng)
        per_task[name] = (headline.values.mean(0), final.tasks)
        params_count = records.evals.loc[records.evals["experiment"] == name, "parameter_count"]
        rows.append({
            "experiment": name, "label": exp.label or name, "method": exp.method,
            "parameters": int(params_count.iloc[0]), "seeds": head.n_seeds, "step": step,
            "primary": primary, "iqm": head.iqm, "iqm_low": head.iqm_low, "iqm_high": head.iqm_high,
            "mean": head.mean, "std": head.std,
            "final_mean": float(final.values.mean()), "best_mean": float(best.values.mean()),
            "published": published.get(exp.benchmark, exp.method),
        })
    return pd.DataFrame(rows), per_task


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def table_markdown(frame: pd.DataFrame, table: TableConfig, primary: str) -> str:
    """The table as GitHub markdown; the header names the primary metric."""
    what = "success at the step" if primary == "final" else "best success so far"
    lines = [f"| row | parameters | seeds | IQM {primary} [95% CI] | mean ± std {primary} | "
             f"final | best so far | published* |",
             "|---|---:|---:|---|---|---:|---:|---:|"]
    for r in frame.itertuples():
        lines.append(f"| {r.label} | {r.parameters:,} | {r.seeds} | {r.iqm:.3f} "
                     f"[{r.iqm_low:.3f}, {r.iqm_high:.3f}] | {r.mean:.3f} ± {r.std:.3f} | "
                     f"{r.final_mean:.3f} | {r.best_mean:.3f} | {_fmt(r.published, '.2f')} |")
    step = int(frame["step"].iloc[0])
    return (f"#### {table.title}\n\nReported at {step:,} vector steps per task; primary metric: "
            f"**{primary}** ({what}), IQM over runs x tasks with a stratified bootstrap 95% "
            "confidence interval over seeds.\n\n" + "\n".join(lines) + "\n")


def mean_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and std of evaluation success over seeds at every evaluated step."""
    g = curves.groupby(["experiment", "step"], sort=False)["success"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    return out.rename(columns={"mean": "success", "std": "success_std", "count": "seeds"}).fillna(0.0)


def table_plot_frame(params: Params, table: TableConfig, curves: pd.DataFrame) -> pd.DataFrame:
    """DVC plot data of one table: a line per row (mean over the table's seeds) up to its step.

    Long format (``title, row, step, success, success_std, seeds``): the project's ``rows``
    template colours by ``row``, and the offline page titles the chart from ``title``.
    """
    step, seeds = params.table_step(table), params.table_seeds(table)
    sub = curves[(curves["step"] <= step) & curves["seed"].isin(seeds)
                 & curves["experiment"].isin(table.rows)]
    means = mean_curves(sub)
    means["row"] = means["experiment"].map(lambda n: params.experiments[n].label or n)
    means["title"] = f"{table.title}: mean over {len(seeds)} seed(s)"
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
    caption = budget_caption(params)
    sections = [f"Generated by the `aggregate` stage; {caption}.\n"]
    metrics: dict[str, dict] = {}
    written: dict[str, Path] = {}
    sheets = write_videos(params, videos or {}, out_dir)
    for tname, table in params.tables.items():
        frame, per_task = table_frame(params, table, records, published, rng)
        md = table_markdown(frame, table, params.report.primary)
        write_atomic(out_dir / "tables" / f"{tname}.md", md)
        write_atomic(out_dir / "tables" / f"{tname}.csv", frame.to_csv(index=False))
        step, seeds = params.table_step(table), params.table_seeds(table)
        sub = records.curves[(records.curves["step"] <= step)
                             & records.curves["seed"].isin(seeds)]
        labels = {n: params.experiments[n].label or n for n in table.rows}
        curves_png = out_dir / "figures" / f"{tname}_curves.png"
        tasks_png = out_dir / "figures" / f"{tname}_tasks.png"
        plot_curves(sub, list(table.rows), curves_png, f"{table.title} ({len(seeds)} seed(s))",
                    params.report.bootstrap_reps, rng, mark_step=step, labels=labels)
        matrix = np.stack([per_task[n][0] for n in table.rows])
        task_names = per_task[table.rows[0]][1]
        plot_task_heatmap(matrix, [labels[n] for n in table.rows], task_names, tasks_png,
                          f"{table.title}: per-task {params.report.primary} success")
        rollouts = (f" ![{table.title} rollouts](figures/{sheets[tname].name})"
                    if tname in sheets else "")
        sections.append(md + f"\n![{table.title} curves](figures/{curves_png.name}) "
                        f"![{table.title} per task](figures/{tasks_png.name}){rollouts}\n")
        # The headline number of every table row: the primary metric's mean over seeds at the
        # table's step (`short` or `long`; the same in every table listing that row).
        for r in frame.itertuples():
            metrics.setdefault(r.experiment, {})[table.at] = round(float(r.mean), 4)
        write_atomic(out_dir / "plots" / "tables" / f"{tname}.csv",
                          table_plot_frame(params, table, records.curves).to_csv(index=False))
        written[f"{tname}_curves"] = curves_png
        written[f"{tname}_tasks"] = tasks_png
        if tname in sheets:
            written[f"{tname}_rollouts"] = sheets[tname]
    sections.append(f"\\* Published: {published.source}. {published.protocol}.\n")
    written["results"] = out_dir / REPORT_FILE
    write_atomic(written["results"], "\n".join(sections))
    # One small file per experiment: `dvc metrics show` prints a row per experiment with its
    # `short` and `long` headline, and `dvc exp diff` lists what an experiment changed. The
    # statistics behind them (IQM, CI, std, per task) stay in tables/*.csv.
    for exp, values in metrics.items():
        Metrics(**values).write(out_dir / "metrics" / f"{exp}.json")
    written["metrics"] = out_dir / "metrics"
    # One chart per run for `dvc plots show`, named by experiment and seed.
    for (exp, seed), _ in records.curves.groupby(["experiment", "seed"], sort=False):
        write_atomic(out_dir / "plots" / "runs" / f"{run_id(exp, seed)}.csv",
                          run_plot_frame(params, exp, seed, records.curves).to_csv(index=False))
    return written
