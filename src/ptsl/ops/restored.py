"""Runs whose outputs DVC restored, shown in MLflow.

A stage that DVC restores (from its cache, its run cache or a remote: ``dvc pull``, the grid's
fan-in, a fresh clone's ``make study-<name>``) does not run, so it logs nothing, and the MLflow
store knows only what trained against it. ``python -m ptsl.ops.restored`` logs one run for every
training and evaluation stage whose outputs are in the workspace as ``dvc.lock`` records them
and which the store has no run of: in the stage's MLflow experiment (``train`` / ``evaluate``,
``<study>/train`` / ``<study>/evaluate``), under the stage's run name and tags, with the params
the stage logs, its curve as step-indexed metrics (training) or its evaluation's numbers, its
small output files as artifacts, and the tags ``ptsl.restored=true`` and ``ptsl.restored_from``
(the DVC cache, or a DVC remote). A training run starts when its training did and lasts as
long, where the folder's ``time.json`` records it (a study's does), and has no end time where
nothing does; tag ``ptsl.run_time`` says which (:mod:`ptsl.ops.run_times`). It reads the outputs
and writes only to the MLflow store.

Which stages: those with a ``dvc.lock`` entry whose params are the params file's (DVC would
otherwise run them again, so their outputs no longer describe it; an evaluation's training
stage too, and it must have evaluated the run that entry records) and whose output files are
there and name their run (``summary.json``: experiment, seed and final step; the evaluation
record: experiment and seed). Which the store already has: a FINISHED run of the stage (tag
``dvc_stage``, outside ``dvc exp run``) whose params agree with the stage's, a restored one
included, so a second call logs nothing; a restored run logged before restored runs carried
their times (no tag ``ptsl.run_time``) is replaced by one that does. ``PTSL_TRACKING=off`` logs
nothing.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import ConfigError, CorruptFileError
from .paths import EVALS, RUNS
from .run_times import TAG as TIME_TAG
from .run_times import TIME_RECORD, RunTime, read_record, run_time
from .stage import USER_ERRORS
from .study import STUDIES, study_dirs, study_of
from .tracking import (TRACKING_ENV, TrackingError, dvc_experiment, display_name, experiment_name,
                       flatten, git_commit, project_root, signals_held, tracking_enabled,
                       tracking_uri)

#: The stage groups whose runs this logs, by the kind of MLflow run they make.
KINDS = {"train": "train", "train_ptsl": "train", "evaluate": "evaluate",
         "evaluate_ptsl": "evaluate"}
RESTORED_TAG = "ptsl.restored"
FROM_TAG = "ptsl.restored_from"
#: What a training stage writes (the outputs must all be there).
RUN_FILES = ("model.pt", "curve.csv", "summary.json")
# MLflow's log_batch takes at most 100 params per call, and 1,000 entries in all.
_PARAMS, _ENTRIES = 100, 1000


@dataclass(frozen=True)
class Stage:
    """A training or evaluation stage of the pipeline in ``folder`` (``train@mt10_care-1``)."""

    name: str
    kind: str        # train or evaluate: the MLflow experiment's kind
    experiment: str  # mt10_care
    seed: int

    @property
    def run(self) -> str:
        return f"{self.experiment}-{self.seed}"


@dataclass
class Outcome:
    """What one pipeline folder's call did: the runs logged, those the store had, and the
    stages left out with why."""

    folder: Path
    logged: dict[str, int] = field(default_factory=lambda: {"train": 0, "evaluate": 0})
    present: int = 0
    replaced: int = 0  # restored runs logged without their times, replaced
    left_out: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""

    def leave_out(self, stage: Stage, why: str) -> None:
        self.left_out.setdefault(why, []).append(stage.name)


def lock_stages(folder: Path) -> dict[str, Any]:
    """The stage entries of ``folder``'s dvc.lock (empty without one), read by libyaml where
    it is there (a study's lock: 0.05 s against 0.3 s in pure Python)."""
    path = folder / "dvc.lock"
    if not path.is_file():
        return {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return (yaml.load(path.read_text(), Loader=loader) or {}).get("stages") or {}


def lock_runs(lock: Mapping[str, Any]) -> list[Stage]:
    """The training and evaluation stages of dvc.lock's entries ``lock``, in its order."""
    stages = []
    for name in lock:
        group, _, item = name.partition("@")
        exp, _, seed = item.rpartition("-")
        if group in KINDS and exp and seed.isdigit():
            stages.append(Stage(name, KINDS[group], exp, int(seed)))
    return stages


def _lookup(raw: Mapping[str, Any], dotted: str) -> Any:
    """``experiments.mt10_care`` of a params file's raw content (None where it is missing)."""
    value: Any = raw
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def params_changed(entry: Mapping[str, Any], raw: Mapping[str, Any]) -> list[str]:
    """The params a dvc.lock ``entry`` recorded that the params file (``raw``) now holds other
    values of: DVC would run that stage again."""
    recorded = (entry.get("params") or {}).get("params.yaml") or {}
    return [key for key, value in recorded.items() if _lookup(raw, key) != value]


def outdated(stage: Stage, lock: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """Why ``stage``'s dvc.lock entry no longer describes the params file (``raw``), so that DVC
    would run it again; "" when it does. An evaluation also follows its training stage: its own
    params (``evaluate``) say nothing of the run it evaluated."""
    if params_changed(lock[stage.name], raw):
        return "its params changed since dvc.lock (dvc repro runs it again)"
    if stage.kind == "train":
        return ""
    item = stage.name.partition("@")[2]
    trained = next((f"{g}@{item}" for g, kind in KINDS.items()
                    if kind == "train" and f"{g}@{item}" in lock), None)
    if trained is None:
        return "dvc.lock has no entry of the run it evaluated"
    if params_changed(lock[trained], raw):
        return ("the params of the run it evaluated changed since dvc.lock (dvc repro runs it "
                "again)")
    run = (RUNS / stage.run).as_posix()
    made = {o.get("path"): o.get("md5") for o in lock[trained].get("outs") or []}
    used = {d.get("path"): d.get("md5") for d in lock[stage.name].get("deps") or []}
    if made.get(run) != used.get(run):
        return "it evaluated another run than the one dvc.lock records (dvc repro runs it again)"
    return ""


def read_curve(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """``curve.csv``'s columns and rows, as text."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    return list(reader.fieldnames or ()), rows


def curve_metrics(path: Path) -> list[tuple[str, float, int]]:
    """The curve as (key, value, step): the evaluation columns under ``eval/`` as a training
    stage logs them, and the windowed training success the stage keeps only in its curve
    (``train_episodes``, ``train_success``, ``train_success/<task>``) under ``curve/``; empty
    cells (no training episode before step 0) are left out."""
    columns, rows = read_curve(path)
    out = []
    for row in rows:
        step = int(float(row["step"]))
        for col in columns:
            if col == "step" or row[col] in ("", None):
                continue
            value = float(row[col])
            if math.isfinite(value):
                out.append((f"curve/{col}" if col.startswith("train_") else f"eval/{col}",
                            value, step))
    return out


@dataclass(frozen=True)
class Logged:
    """A FINISHED run of a stage in the store: its id, its params and whether it is current (a
    run the stage logged, or a restored one that carries its times: tag ``ptsl.run_time``)."""

    run_id: str
    params: dict[str, str]
    current: bool


class Store:
    """The MLflow store the stages log to, through MLflow's client: its FINISHED runs by stage
    (read once per experiment) and the restored runs written into it."""

    def __init__(self, root: Path) -> None:
        from mlflow.tracking import MlflowClient

        from . import tracking

        self.root = root
        self.uri = tracking_uri(root)
        if self.uri.startswith(("http://", "https://")):
            tracking._probe_server(self.uri)
        db = tracking._store_path(self.uri)
        try:
            if db is not None and db.parent == root:
                tracking.relocate_store(db, root)
            self.client = MlflowClient(tracking_uri=self.uri)
            self.client.search_experiments(max_results=1)  # opens (or creates) the store
        except TrackingError:
            raise
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy, sqlite3 and MLflow errors alike
            raise tracking._store_error(self.uri, exc) from None
        self._ids: dict[str, str | None] = {}
        self._runs: dict[str, dict[str, list[Logged]]] = {}

    def experiment_id(self, name: str, create: bool) -> str | None:
        """The id of MLflow experiment ``name``; made (with the project's artifact folder and
        tags, as the stages make it) when ``create``, else None when it does not exist."""
        from . import tracking

        if self._ids.get(name) is None:
            if create:
                self._ids[name] = tracking._experiment_id(self.client, name, self.root)
            else:
                exp = self.client.get_experiment_by_name(name)
                self._ids[name] = exp.experiment_id if exp is not None else None
        return self._ids[name]

    def finished(self, experiment: str) -> dict[str, list[Logged]]:
        """Every FINISHED run of ``experiment`` outside ``dvc exp run``, by the stage it ran
        (tag ``dvc_stage``)."""
        if experiment not in self._runs:
            by_stage: dict[str, list[Logged]] = {}
            exp_id = self.experiment_id(experiment, create=False)
            if exp_id is not None:
                query = (f"tags.dvc_experiment = '{dvc_experiment()}' "
                         "and attributes.status = 'FINISHED'")
                token = None
                while True:
                    page = self.client.search_runs([exp_id], query, max_results=1000,
                                                   page_token=token)
                    for run in page:
                        tags = run.data.tags
                        if tags.get("dvc_stage"):
                            by_stage.setdefault(tags["dvc_stage"], []).append(Logged(
                                run.info.run_id, dict(run.data.params),
                                tags.get(RESTORED_TAG) != "true" or TIME_TAG in tags))
                    token = page.token
                    if not token:
                        break
            self._runs[experiment] = by_stage
        return self._runs[experiment]

    def matching(self, experiment: str, stage: str, params: Mapping[str, str]) -> list[Logged]:
        """The FINISHED runs of ``stage`` whose params agree with ``params`` on every name both
        have (a run logged by an older version of the code may have fewer)."""
        return [run for run in self.finished(experiment).get(stage, [])
                if all(run.params[k] == v for k, v in params.items() if k in run.params)]

    def has(self, experiment: str, stage: str, params: Mapping[str, str]) -> bool:
        """Whether the store holds a current run of ``stage`` with ``params`` (:class:`Logged`)."""
        return any(run.current for run in self.matching(experiment, stage, params))

    def log(self, experiment: str, run_name: str, tags: Mapping[str, str],
            params: Mapping[str, str], metrics: Sequence[tuple[str, float, int]],
            files: Sequence[Path], times: RunTime) -> str:
        """One FINISHED run with the start and end of ``times`` (no end time where it has
        none), written in batches; a run left half-written (Ctrl-C, a store failure) is
        deleted, so that none is seen and the next call logs it again."""
        from mlflow.entities import Metric, Param

        exp_id = self.experiment_id(experiment, create=True)
        now = int(time.time() * 1000)  # when the metrics were logged
        with signals_held():
            run = self.client.create_run(exp_id, run_name=run_name,
                                         tags={**tags, TIME_TAG: times.note},
                                         start_time=times.start_ms)
        run_id = run.info.run_id
        try:
            items = [Param(k, v) for k, v in params.items()]
            points = [Metric(k, v, now, s) for k, v, s in metrics]
            with signals_held():
                while items or points:  # params and metrics together, as few calls as can be
                    batch, items = items[:_PARAMS], items[_PARAMS:]
                    room = _ENTRIES - len(batch)
                    self.client.log_batch(run_id, params=batch, metrics=points[:room])
                    points = points[room:]
                for path in files:
                    self.client.log_artifact(run_id, str(path))
                if times.end_ms is None:  # FINISHED, its end time left empty
                    self.client.update_run(run_id, status="FINISHED")
                else:
                    self.client.set_terminated(run_id, "FINISHED", end_time=times.end_ms)
        except BaseException:
            with signals_held():
                self.client.delete_run(run_id)
            raise
        self.finished(experiment).setdefault(tags["dvc_stage"], []).append(
            Logged(run_id, dict(params), True))
        return run_id

    def delete(self, experiment: str, runs: Sequence[Logged]) -> None:
        """Delete ``runs`` (MLflow keeps them among its deleted runs until ``mlflow gc``)."""
        gone = {run.run_id for run in runs}
        for run in runs:
            with signals_held():
                self.client.delete_run(run.run_id)
        for logged in self.finished(experiment).values():
            logged[:] = [run for run in logged if run.run_id not in gone]


def _stage_tags(stage: Stage, commit: str, source: str, extra: Mapping[str, str]) -> dict:
    """The tags the stage's own run has (:func:`ptsl.ops.tracking.start_run`), less what
    describes a machine that ran it (host, process, torch device), plus the restored marks."""
    tags = {"mlflow.runName": display_name(stage.run), "dvc_stage": stage.name,
            "dvc_experiment": dvc_experiment(), "git_commit": commit,
            "mlflow.source.name": stage.name, "mlflow.source.type": "PROJECT",
            RESTORED_TAG: "true", FROM_TAG: source,
            "mlflow.note.content": (
                f"DVC stage `{stage.name}`, restored by DVC from the {source} at git commit "
                f"`{commit[:10]}`: not trained or evaluated against this store, so it has the "
                "stage's params, its output files and the numbers they hold (no losses, no "
                "per-episode training success); its start and duration are those tag "
                f"`{TIME_TAG}` gives."), **extra}
    if commit != "unknown":
        tags["mlflow.source.git.commit"] = commit
    return tags


def _params(values: Mapping[str, Any]) -> dict[str, str]:
    """Params as the stage's tracker logs them (:meth:`ptsl.ops.tracking.Tracker.log_params`)."""
    return {k: str(v)[:6000] for k, v in flatten(values).items()}


@dataclass(frozen=True)
class _Outputs:
    """A restored stage's outputs as its run logs them."""

    values: dict[str, str]                                # its params
    tags: dict[str, str]                                  # beyond experiment and seed
    metrics: Callable[[], list[tuple[str, float, int]]]   # read when the run is logged
    files: list[Path]                                     # its artifacts


def _train_outputs(stage: Stage, folder: Path, cfg: Any) -> _Outputs | str:
    """A training stage's outputs in ``folder``, or why they cannot be logged."""
    from ..core.records import Summary

    run_dir = folder / RUNS / stage.run
    if not all((run_dir / f).is_file() for f in RUN_FILES):
        return "its outputs are not in the workspace (dvc pull)"
    try:
        summary = Summary.read_run(run_dir / "summary.json", stage.experiment,
                                   stage.seed, cfg.train.steps)
    except CorruptFileError as exc:
        return f"its outputs do not match dvc.lock ({exc})"
    return _Outputs(
        _params({**cfg.to_dict(), **cfg.headline()}), {"method": cfg.experiment.method},
        lambda: [*curve_metrics(run_dir / "curve.csv"),
                 ("final_success", summary.final_success, summary.final_step),
                 ("parameter_count", float(summary.parameter_count), summary.final_step)],
        [run_dir / "curve.csv", run_dir / "summary.json"])


def _evaluation_outputs(stage: Stage, folder: Path, params: Any, cfg: Any) -> _Outputs | str:
    """An evaluation stage's record in ``folder``, or why it cannot be logged."""
    from ..core.records import Evaluation

    path = folder / EVALS / f"{stage.run}.json"
    if not path.is_file():
        return "its outputs are not in the workspace (dvc pull)"
    try:
        record = Evaluation.read_of(path, stage.experiment, stage.seed)
    except CorruptFileError as exc:
        return f"its outputs do not match dvc.lock ({exc})"
    return _Outputs(
        _params({"episodes": params.evaluate.episodes, "videos": params.evaluate.videos,
                 **cfg.headline()}), {},
        lambda: [("success", record.success, 0), ("return", record.returns, 0),
                 ("parameter_count", float(record.parameter_count), 0),
                 *((f"success/{task}", v, 0) for task, v in record.per_task.items())],
        [path])


def restore_folder(folder: Path, source_choice: str, store_for: Any) -> Outcome:
    """Log the restored runs of the pipeline in ``folder`` (the project root or a study's
    folder) into the store ``store_for(root)`` returns (opened only when a run is to be
    logged or looked up); returns what it did."""
    from .params import load_params, run_config

    out = Outcome(folder)
    lock = lock_stages(folder)
    stages = lock_runs(lock)
    if not stages:
        return out
    params = load_params(folder / "params.yaml")
    raw = yaml.safe_load((folder / "params.yaml").read_text()) or {}
    root, commit = project_root(folder), ""
    times_record = read_record(folder)
    record_path = (folder / TIME_RECORD).relative_to(root).as_posix()  # as the tag names it
    store = None
    for stage in stages:
        if stage.experiment not in params.experiments:
            out.leave_out(stage, "its experiment is not in params.yaml")
            continue
        why = outdated(stage, lock, raw)
        if why:
            out.leave_out(stage, why)
            continue
        cfg = run_config(params, stage.experiment, stage.seed)
        outputs = (_train_outputs(stage, folder, cfg) if stage.kind == "train"
                   else _evaluation_outputs(stage, folder, params, cfg))
        if isinstance(outputs, str):
            out.leave_out(stage, outputs)
            continue
        mlflow_exp = experiment_name(stage.kind, folder)
        store = store or store_for(root)
        if store.has(mlflow_exp, stage.name, outputs.values):
            out.present += 1
            continue
        stale = store.matching(mlflow_exp, stage.name, outputs.values)  # restored, without times
        if not commit:
            commit = git_commit(folder)
            out.source = source_label(folder, source_choice)
        tags = {"experiment": stage.experiment, "seed": str(stage.seed), **outputs.tags}
        store.log(mlflow_exp, display_name(stage.run),
                  _stage_tags(stage, commit, out.source, tags), outputs.values,
                  outputs.metrics(), outputs.files,
                  run_time(stage.name, stage.kind, times_record, record_path))
        store.delete(mlflow_exp, stale)
        out.logged[stage.kind] += 1
        out.replaced += len(stale)
    return out


def source_label(folder: Path, choice: str) -> str:
    """Where the outputs came from, for tag ``ptsl.restored_from``: ``DVC cache``, or ``DVC
    remote <name>`` (``remote``: the default remote; ``auto``: a study's own remote, which the
    grid fetches a fresh clone's runs from, else the cache)."""
    if choice == "cache":
        return "DVC cache"
    from dvc.config import Config

    # DVC's own reading of .dvc/config and config.local (a third of a `dvc remote list`).
    config = Config(dvc_dir=str(project_root(folder) / ".dvc"), validate=False)
    study = study_of(folder)
    if choice == "auto":
        own = study is not None and study[1] in config.get("remote", {})
        return f"DVC remote {study[1]}" if own else "DVC cache"
    default = config.get("core", {}).get("remote")
    return f"DVC remote {default}" if default else "DVC remote"


def report(out: Outcome, seconds: float) -> list[str]:
    """The lines a call prints for one pipeline folder."""
    where = out.folder.name if study_of(out.folder) else "project"
    train, evaluate = out.logged["train"], out.logged["evaluate"]
    kinds = [experiment_name(k, out.folder) for k in ("train", "evaluate")]
    if not (train or evaluate or out.present or out.left_out):
        return [f"restored: {where}: no training or evaluation stage in its dvc.lock"]
    if train or evaluate:
        lines = [f"restored: {where}: logged {train} training and {evaluate} evaluation run(s) "
                 f"whose outputs DVC restored (from the {out.source}) to MLflow experiments "
                 f"{', '.join(kinds)}, tagged {RESTORED_TAG}=true, in {seconds:.1f} s; "
                 f"{out.present} already there"
                 + (f"; {out.replaced} replaced, logged before restored runs carried their "
                    "times" if out.replaced else "")]
    else:
        lines = [f"restored: {where}: nothing to log" + (
            f"; {out.present} run(s) of its outputs already in the MLflow store" if out.present
            else "")]
    for why, stages in out.left_out.items():
        shown = ", ".join(stages[:3]) + (f" and {len(stages) - 3} more" if len(stages) > 3
                                         else "")
        lines.append(f"restored: {where}: left out {len(stages)} stage(s), {why}: {shown}")
    return lines


def folders(root: Path, study: str | None, every: bool) -> list[Path]:
    """The pipeline folders a call covers: the project's, study ``study``'s, or (``every``)
    the project's and every study's."""
    if study is not None:
        known = [p.name for p in study_dirs(root)]
        if study not in known:
            raise ConfigError(f"--study: unknown study {study!r}; allowed: "
                              f"{', '.join(known) or 'none'} (folders under {root / STUDIES} "
                              "with a params.yaml)")
        return [root / STUDIES / study]
    return [root, *study_dirs(root)] if every else [root]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptsl.ops.restored", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument("--study", default=None, metavar="NAME",
                      help="the runs of study studies/NAME/ (default: the project's pipeline)")
    pick.add_argument("--all", action="store_true",
                      help="the project's pipeline and every study's")
    ap.add_argument("--from", dest="source", choices=("auto", "cache", "remote"),
                    default="auto",
                    help="what tag ptsl.restored_from says: the DVC cache, the default DVC "
                         "remote, or auto: a study's own remote where it has one (what the "
                         "grid fetches a fresh clone's runs from), else the cache "
                         "(default: %(default)s)")
    args = ap.parse_args(argv)
    root = Path.cwd().resolve()
    if not (root / "dvc.yaml").is_file() or study_of(root):
        print(f"error: no project dvc.yaml in {root}: run this from the project root",
              file=sys.stderr)
        return 2
    if not tracking_enabled():
        print(f"restored: tracking is off ({TRACKING_ENV}=off): nothing logged")
        return 0
    stores: dict[Path, Store] = {}

    def store_for(where: Path) -> Store:
        if where not in stores:
            stores[where] = Store(where)
        return stores[where]

    try:
        for folder in folders(root, args.study, args.all):
            t0 = time.perf_counter()
            out = restore_folder(folder, args.source, store_for)
            print("\n".join(report(out, time.perf_counter() - t0)), flush=True)
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
