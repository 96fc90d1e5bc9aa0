"""Runs -> the paper's tables (markdown, CSV), figures (curves with confidence bands, per-task
heatmaps), DVC plot data and metrics, with published numbers beside ours.

Every table reads the runs' evaluation curves at its reported step: ``final`` is the success at
that step, ``best`` the best evaluation so far; ``report.primary`` picks the headline one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import yaml

from .config import Params, TableConfig, preset_matches
from .figures import plot_curves, plot_task_heatmap
from .io import write_json_atomic, write_text_atomic
from .paths import run_id
from .stats import scores_at, summarize


@dataclass(frozen=True)
class RunRecords:
    """Evaluation records (one row per run) and training curves (one row per eval point)."""

    evals: pd.DataFrame
    curves: pd.DataFrame


@dataclass(frozen=True)
class Published:
    """Success rates published elsewhere, under another protocol (kept as data with its source)."""

    source: str
    protocol: str
    success: Mapping[str, Mapping[str, float]]  # benchmark -> method -> success

    @staticmethod
    def load(path: Path) -> "Published":
        if not path.is_file():
            raise FileNotFoundError(f"{path}: published numbers file not found")
        raw = yaml.safe_load(path.read_text())
        return Published(source=raw["source"], protocol=raw["protocol"], success=raw["success"])

    def get(self, benchmark: str, method: str) -> float | None:
        return self.success.get(benchmark, {}).get(method)


def collect(params: Params, runs_dir: Path, evals_dir: Path) -> RunRecords:
    """Read the outputs of every (experiment, seed) the params list; a missing one is an error."""
    eval_rows, curve_rows = [], []
    for exp in params.runs.plain + params.runs.ptsl:
        for seed in params.seeds:
            name = run_id(exp, seed)
            ev_path, curve_path = evals_dir / f"{name}.json", runs_dir / name / "curve.csv"
            for p in (ev_path, curve_path):
                if not p.is_file():
                    raise FileNotFoundError(f"{p} is missing; run `dvc repro` to produce it")
            eval_rows.append(json.loads(ev_path.read_text()))
            curve = pd.read_csv(curve_path)
            curve.insert(0, "seed", seed)
            curve.insert(0, "experiment", exp)
            curve_rows.append(curve)
    return RunRecords(evals=pd.DataFrame(eval_rows), curves=pd.concat(curve_rows, ignore_index=True))


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


def write_reports(params: Params, records: RunRecords, published: Published,
                  out_dir: Path) -> dict[str, Path]:
    """Write every report file under ``out_dir``; returns the main ones."""
    rng = np.random.default_rng(0)  # bootstrap draws: fixed so reports are reproducible
    caption = budget_caption(params)
    sections = [f"Generated by the `aggregate` stage; {caption}.\n"]
    metrics: dict[str, dict] = {}
    written: dict[str, Path] = {}
    for tname, table in params.tables.items():
        frame, per_task = table_frame(params, table, records, published, rng)
        md = table_markdown(frame, table, params.report.primary)
        write_text_atomic(out_dir / "tables" / f"{tname}.md", md)
        write_text_atomic(out_dir / "tables" / f"{tname}.csv", frame.to_csv(index=False))
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
        sections.append(md + f"\n![{table.title} curves](figures/{curves_png.name}) "
                        f"![{table.title} per task](figures/{tasks_png.name})\n")
        metrics[tname] = {r.experiment: {"iqm": r.iqm, "mean": r.mean, "std": r.std,
                                         "seeds": r.seeds} for r in frame.itertuples()}
        written[f"{tname}_curves"] = curves_png
        written[f"{tname}_tasks"] = tasks_png
    sections.append(f"\\* Published: {published.source}. {published.protocol}.\n")
    written["results"] = out_dir / "results.md"
    write_text_atomic(written["results"], "\n".join(sections))
    written["metrics"] = out_dir / "metrics.json"
    write_json_atomic(written["metrics"], metrics)
    # One CSV per experiment so that `dvc plots show` draws one line each.
    for exp, g in mean_curves(records.curves).groupby("experiment", sort=False):
        write_text_atomic(out_dir / "curves" / f"{exp}.csv",
                          g[["step", "success", "success_std"]].to_csv(index=False))
    return written
