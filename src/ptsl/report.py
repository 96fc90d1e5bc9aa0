"""Runs -> the paper's tables (markdown, CSV), figures (curves with confidence bands, per-task
heatmaps, rollout contact sheets), DVC plot data and metrics, with published numbers beside ours.

Every table reads the runs' evaluation curves at its reported step: ``final`` is the success at
that step, ``best`` the best evaluation so far; ``report.primary`` picks the headline one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from .config import ConfigError, Params, TableConfig, preset_matches, read_yaml, run_config
from .figures import plot_contact_sheet, plot_curves, plot_task_heatmap
from .io import CorruptFileError, write_json_atomic, write_text_atomic
from .paths import run_id
from .stats import TASK_PREFIX, scores_at, summarize


@dataclass(frozen=True)
class RunRecords:
    """Evaluation records (one row per run) and training curves (one row per eval point)."""

    evals: pd.DataFrame
    curves: pd.DataFrame


REBUILD = "run `dvc repro` to rebuild it"


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


def _read_json(path: Path, role: str) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run `dvc repro` to produce it")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptFileError(path, role, f"not valid JSON: {exc}", REBUILD) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)


def _read_run_json(path: Path, role: str, noun: str, experiment: str, seed: int) -> dict:
    """A JSON object that must belong to run (``experiment``, ``seed``)."""
    data = _read_json(path, role)
    if not isinstance(data, dict):
        raise CorruptFileError(path, role, "expected a JSON object", REBUILD)
    if (data.get("experiment"), data.get("seed")) != (experiment, seed):
        raise CorruptFileError(path, role, f"it is the {noun} of {data.get('experiment')!r} "
                               f"seed {data.get('seed')!r}, not {experiment!r} seed {seed}",
                               REBUILD)
    return data


def read_eval(path: Path, experiment: str, seed: int) -> dict:
    """One evaluation record (``data/eval/<exp>-<seed>.json``), checked."""
    role = "evaluation record"
    record = _read_run_json(path, role, "record", experiment, seed)
    count = record.get("parameter_count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise CorruptFileError(path, role, "parameter_count: expected a positive integer",
                               REBUILD)
    if not _is_number(record.get("success")):
        raise CorruptFileError(path, role, "success: expected a number", REBUILD)
    return record


def read_curve(path: Path, final_step: int, steps: Sequence[int]) -> pd.DataFrame:
    """One run's evaluation curve (``data/runs/<exp>-<seed>/curve.csv``), checked: the columns
    of a curve, no gap in any value, steps rising to ``final_step`` (where the run stops) and
    each of ``steps`` (the steps the tables report) evaluated."""
    role = "training curve"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run `dvc repro` to produce it")
    if not path.read_bytes().endswith(b"\n"):  # every curve is written whole, newline last
        raise CorruptFileError(path, role, "truncated: no newline at its end", REBUILD)
    try:
        curve = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CorruptFileError(path, role, f"not a CSV table: {' '.join(str(exc).split())}",
                               REBUILD) from None
    tasks = [c for c in curve.columns if str(c).startswith(TASK_PREFIX)]
    missing = [c for c in ("step", "success", "return") if c not in curve.columns]
    if missing or not tasks:
        what = f"columns {missing}" if missing else f"{TASK_PREFIX}<task> columns"
        raise CorruptFileError(path, role, f"no {what}", REBUILD)
    if curve.empty or curve.isna().any().any():
        raise CorruptFileError(path, role, "empty or with missing values (truncated?)", REBUILD)
    numeric = curve[["step", "success", "return", *tasks]]
    if not all(pd.api.types.is_numeric_dtype(numeric[c]) for c in numeric.columns):
        raise CorruptFileError(path, role, "non-numeric values", REBUILD)
    step = curve["step"]
    if not (step == step.round()).all() or not step.is_monotonic_increasing \
            or step.duplicated().any():
        raise CorruptFileError(path, role, "steps are not whole numbers rising row by row",
                               REBUILD)
    success = curve[["success", *tasks]]
    if ((success < 0) | (success > 1)).any().any():
        raise CorruptFileError(path, role, "success values outside [0, 1]", REBUILD)
    last = int(step.iloc[-1])
    if last != final_step:
        raise CorruptFileError(path, role, f"ends at step {last}, but params.yaml trains this "
                               f"run to step {final_step}", REBUILD)
    absent = sorted(set(steps) - set(step.astype(int)))
    if absent:
        raise CorruptFileError(path, role, f"no evaluation at step(s) {absent} that the tables "
                               "report", REBUILD)
    curve["step"] = step.astype(int)
    return curve


def read_summary(path: Path, experiment: str, seed: int, final_step: int) -> dict:
    """A run's ``summary.json``, checked against the run it belongs to and its curve."""
    role = "run summary"
    summary = _read_run_json(path, role, "summary", experiment, seed)
    if summary.get("final_step") != final_step:
        raise CorruptFileError(path, role, f"final_step is {summary.get('final_step')!r}, but "
                               f"the run trains to step {final_step}", REBUILD)
    return summary


def collect(params: Params, runs_dir: Path, evals_dir: Path) -> RunRecords:
    """Read and check the outputs of every (experiment, seed) the params list; a missing one
    is a FileNotFoundError, a truncated or inconsistent one a CorruptFileError naming it."""
    eval_rows, curve_rows = [], []
    for exp in params.runs.plain + params.runs.ptsl:
        for seed in params.seeds:
            name = run_id(exp, seed)
            final_step = run_config(params, exp, seed).train.steps
            steps = {params.table_step(t) for t in params.tables.values()
                     if exp in t.rows and seed in params.table_seeds(t)}
            eval_rows.append(read_eval(evals_dir / f"{name}.json", exp, seed))
            curve = read_curve(runs_dir / name / "curve.csv", final_step, sorted(steps))
            read_summary(runs_dir / name / "summary.json", exp, seed, final_step)
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


@dataclass(frozen=True)
class Rollouts:
    """Recorded rollout videos of one run (``data/videos/<exp>-<seed>/``)."""

    folder: Path
    tasks: Mapping[str, Mapping[str, Any]]  # task -> {"success": bool, "frames": int}

    def tiles(self) -> list[tuple[str, np.ndarray, bool]]:
        """(task, last frame, success) per task, for a contact sheet."""
        from PIL import Image

        return [(name, np.asarray(Image.open(self.folder / f"{name}.png").convert("RGB")),
                 bool(info["success"])) for name, info in self.tasks.items()]


def collect_videos(params: Params, videos_dir: Path) -> dict[str, Rollouts]:
    """Runs (``<exp>-<seed>``) with recorded videos; a run's missing index is an error, and so
    is an index that is not valid or names a file that is not there (CorruptFileError)."""
    out = {}
    for exp in params.runs.plain + params.runs.ptsl:
        for seed in params.seeds:
            name = run_id(exp, seed)
            index_path = videos_dir / name / "index.json"
            index = _read_json(index_path, "video index")
            if not isinstance(index, dict) or not isinstance(index.get("videos"), bool):
                raise CorruptFileError(index_path, "video index", "expected an object with "
                                       "videos: true or false", REBUILD)
            if index["videos"]:
                tasks = index.get("tasks")
                if not isinstance(tasks, dict) or not all(
                        isinstance(info, dict) and "success" in info for info in tasks.values()):
                    raise CorruptFileError(index_path, "video index", "tasks: expected task -> "
                                           "{success, frames}", REBUILD)
                for task in tasks:
                    for ext in ("gif", "png"):
                        if not (videos_dir / name / f"{task}.{ext}").is_file():
                            raise CorruptFileError(index_path, "video index", f"it lists "
                                                   f"{task}.{ext}, which is missing", REBUILD)
                out[name] = Rollouts(folder=videos_dir / name, tasks=tasks)
    return out


def write_videos(params: Params, videos: Mapping[str, Rollouts], out_dir: Path) -> dict[str, Path]:
    """Copy the GIFs to ``out_dir/videos/<exp>-<seed>/`` and draw one contact sheet per table
    (a frame grid per table row, its first seed) under ``out_dir/figures/``."""
    target = out_dir / "videos"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if not videos:
        (target / "README.md").write_text(
            "No rollout videos: set `evaluate.videos: true` in params.yaml (needs off-screen "
            "MuJoCo rendering, see the README) and run `dvc repro`.\n")
        return {}
    for name, rollouts in videos.items():
        (target / name).mkdir()
        for task in rollouts.tasks:
            shutil.copy2(rollouts.folder / f"{task}.gif", target / name / f"{task}.gif")
    sheets = {}
    for tname, table in params.tables.items():
        seed = params.table_seeds(table)[0]
        names = [(n, run_id(n, seed)) for n in table.rows]
        if not all(run in videos for _, run in names):
            continue
        rows = [(f"{params.experiments[n].label or n} ({run})", videos[run].tiles())
                for n, run in names]
        path = out_dir / "figures" / f"{tname}_rollouts.png"
        plot_contact_sheet(rows, path, f"{table.title}: last frame of one deterministic episode "
                                       f"per task, seed {seed} (✓ success)")
        sheets[tname] = path
    return sheets


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
        old = Path(tmp) / "old"
        old.mkdir()
        for name in (REPORT_FILE, *REPORT_DIRS):
            target = out_dir / name
            if target.exists() or target.is_symlink():
                os.replace(target, old / name)
            os.replace(staging / name, target)
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
        rollouts = (f" ![{table.title} rollouts](figures/{sheets[tname].name})"
                    if tname in sheets else "")
        sections.append(md + f"\n![{table.title} curves](figures/{curves_png.name}) "
                        f"![{table.title} per task](figures/{tasks_png.name}){rollouts}\n")
        # The headline number of every table row: the primary metric's mean over seeds at the
        # table's step (`short` or `long`; the same in every table listing that row).
        for r in frame.itertuples():
            metrics.setdefault(r.experiment, {})[table.at] = round(float(r.mean), 4)
        write_text_atomic(out_dir / "plots" / "tables" / f"{tname}.csv",
                          table_plot_frame(params, table, records.curves).to_csv(index=False))
        written[f"{tname}_curves"] = curves_png
        written[f"{tname}_tasks"] = tasks_png
        if tname in sheets:
            written[f"{tname}_rollouts"] = sheets[tname]
    sections.append(f"\\* Published: {published.source}. {published.protocol}.\n")
    written["results"] = out_dir / REPORT_FILE
    write_text_atomic(written["results"], "\n".join(sections))
    # One small file per experiment: `dvc metrics show` prints a row per experiment with its
    # `short` and `long` headline, and `dvc exp diff` lists what an experiment changed. The
    # statistics behind them (IQM, CI, std, per task) stay in tables/*.csv.
    for exp, values in metrics.items():
        write_json_atomic(out_dir / "metrics" / f"{exp}.json",
                          {at: values[at] for at in ("short", "long") if at in values})
    written["metrics"] = out_dir / "metrics"
    # One chart per run for `dvc plots show`, named by experiment and seed.
    for (exp, seed), _ in records.curves.groupby(["experiment", "seed"], sort=False):
        write_text_atomic(out_dir / "plots" / "runs" / f"{run_id(exp, seed)}.csv",
                          run_plot_frame(params, exp, seed, records.curves).to_csv(index=False))
    return written
