"""Seeds -> results table (markdown, CSV), success curves (PNG, DVC plot data) and metrics."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .config import Params
from .io import write_json_atomic, write_text_atomic
from .paths import run_id


@dataclass(frozen=True)
class RunRecords:
    """Evaluation records (one row per run) and training curves (one row per eval point)."""

    evals: pd.DataFrame
    curves: pd.DataFrame


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


def results_table(records: RunRecords) -> pd.DataFrame:
    """One row per experiment: mean and std of final evaluation success over seeds."""
    rows = []
    for exp, g in records.evals.groupby("experiment", sort=False):
        s = g["success"].to_numpy(dtype=float)
        rows.append({"experiment": exp, "benchmark": g["benchmark"].iloc[0],
                     "method": g["method"].iloc[0], "success_mean": float(s.mean()),
                     "success_std": float(s.std(ddof=1)) if len(s) > 1 else 0.0,
                     "seeds": int(len(s)), "parameters": int(g["parameter_count"].iloc[0])})
    return pd.DataFrame(rows)


def to_markdown(table: pd.DataFrame, title: str) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""
    lines = [f"### {title}", "",
             "| experiment | benchmark | method | success (mean ± std) | seeds | parameters |",
             "|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.experiment} | {r.benchmark} | {r.method} | "
                     f"{r.success_mean:.3f} ± {r.success_std:.3f} | {r.seeds} | {r.parameters:,} |")
    return "\n".join(lines) + "\n"


def mean_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and std of evaluation success over seeds at every evaluated step."""
    g = curves.groupby(["experiment", "step"], sort=False)["success"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    return out.rename(columns={"mean": "success", "std": "success_std", "count": "seeds"}).fillna(0.0)


def plot_curves(curves: pd.DataFrame, path: Path, title: str) -> None:
    """Success curves, mean over seeds with a ±1 std band, one line per experiment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for exp, g in curves.groupby("experiment", sort=False):
        ax.plot(g["step"], g["success"], label=exp, lw=1.8)
        ax.fill_between(g["step"], np.clip(g["success"] - g["success_std"], 0, 1),
                        np.clip(g["success"] + g["success_std"], 0, 1), alpha=0.2)
    ax.set_xlabel("vector steps (per task)")
    ax.set_ylabel("evaluation success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


def write_reports(params: Params, records: RunRecords, out_dir: Path) -> dict[str, Path]:
    """Write every report file under ``out_dir``; returns what was written."""
    table = results_table(records)
    curves = mean_curves(records.curves)
    budget = f"{params.train.steps:,} vector steps per task, seeds {list(params.seeds)}"
    paths = {"table_md": out_dir / "results.md", "table_csv": out_dir / "results.csv",
             "figure": out_dir / "figures" / "success_curves.png",
             "metrics": out_dir / "metrics.json", "curves_dir": out_dir / "curves"}
    md = to_markdown(table, "Final evaluation success") + f"\nBudget: {budget}.\n"
    write_text_atomic(paths["table_md"], md)
    write_text_atomic(paths["table_csv"], table.to_csv(index=False))
    plot_curves(curves, paths["figure"], f"Evaluation success ({budget})")
    write_json_atomic(paths["metrics"], {r.experiment: {"success_mean": r.success_mean,
                                                        "success_std": r.success_std,
                                                        "seeds": r.seeds}
                                         for r in table.itertuples()})
    # One CSV per experiment so that `dvc plots show` draws one line each.
    for exp, g in curves.groupby("experiment", sort=False):
        write_text_atomic(paths["curves_dir"] / f"{exp}.csv",
                          g[["step", "success", "success_std"]].to_csv(index=False))
    return paths
