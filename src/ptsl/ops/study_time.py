"""How long a study took, read from the MLflow store its stages logged to: per training stage
its attempts (a killed one and the run that resumed it), the compute time they spent, the host
and torch threads; for the study its wall time and how many runs ran at once; and the stages
its params name that the store has no run of (trained against another store).

Evaluation stages are left out (their MLflow runs open only to log the results). A record of
one machine's run, not a pipeline output: the same study elsewhere takes other times, so
nothing here is a DVC output or changes a report. An attempt killed outright counts up to its
last logged episode (the minutes between that and the kill are not in the store; one stopped by
Ctrl-C or SIGTERM, or failed, ended its run itself and counts to then); the work a resume
repeats (from its checkpoint to where the killed attempt had got) is counted, since it was
spent.

The command is ``python -m ptsl.tools.study_time NAME`` (:mod:`ptsl.tools.study_time`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

#: Logged once per training episode: the newest one says how far a killed attempt got.
EPISODE_METRIC = "train/success"


@dataclass(frozen=True)
class Attempt:
    """One MLflow run of a stage: start and end (ms since the epoch), how it ended, where it
    ran, and the vector steps it covered (from ``resumed_at`` to ``last_step``)."""

    run_id: str
    status: str
    start_ms: int
    end_ms: int | None
    host: str
    threads: str
    resumed_at: int
    last_step: int

    @property
    def seconds(self) -> float:
        return 0.0 if self.end_ms is None else max(0, self.end_ms - self.start_ms) / 1000


@dataclass(frozen=True)
class StageTime:
    """Every attempt of one stage, in order of start."""

    stage: str
    attempts: tuple[Attempt, ...]

    @property
    def finished(self) -> bool:
        return any(a.status == "FINISHED" for a in self.attempts)

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.attempts)

    def summary(self) -> dict[str, Any]:
        return {"stage": self.stage, "finished": self.finished, "seconds": round(self.seconds, 1),
                "attempts": len(self.attempts),
                "hosts": sorted({a.host for a in self.attempts}),
                "threads": sorted({a.threads for a in self.attempts}),
                "runs": [asdict(a) for a in self.attempts]}


def _attempt(client: Any, run: Any) -> Attempt:
    info, tags = run.info, run.data.tags
    # A run the next attempt found left RUNNING (its process killed outright) was ended then,
    # renamed "<name> (killed)": its end time is that later moment, so its last row stands in.
    orphan = info.status == "KILLED" and (info.run_name or "").endswith(" (killed)")
    end = None if info.status == "RUNNING" or orphan else info.end_time
    resumed_at = last_step = int(tags.get("ptsl.resumed_at_step", 0))
    history = client.get_metric_history(info.run_id, EPISODE_METRIC)
    own = [m for m in history if m.timestamp >= info.start_time]  # a resume re-logs older rows
    if own:
        last_step = max(last_step, max(m.step for m in own))
        if orphan:
            end = max(m.timestamp for m in own)
    return Attempt(run_id=info.run_id, status=info.status, start_ms=info.start_time,
                   end_ms=end, host=tags.get("host", "unknown"),
                   threads=tags.get("torch_threads", "unknown"),
                   resumed_at=resumed_at, last_step=last_step)


def stage_times(client: Any, experiment: str) -> list[StageTime]:
    """Every stage with runs in MLflow experiment ``experiment`` (outside ``dvc exp run``,
    restored runs left out), by stage name; an experiment that does not exist gives none."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], "tags.dvc_experiment = 'workspace'",
                              order_by=["attributes.start_time ASC"], max_results=50000)
    by_stage: dict[str, list[Attempt]] = {}
    for run in runs:
        stage = run.data.tags.get("dvc_stage")
        # A run DVC restored (ptsl.ops.restored) was trained elsewhere: it spent no time here.
        if stage and run.data.tags.get("ptsl.restored") != "true":
            by_stage.setdefault(stage, []).append(_attempt(client, run))
    return [StageTime(s, tuple(sorted(a, key=lambda x: x.start_ms)))
            for s, a in sorted(by_stage.items())]


def most_at_once(intervals: Sequence[tuple[int, int]]) -> int:
    """The largest number of the ``(start, end)`` intervals that overlap at one moment."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = best = 0
    for _, delta in events:  # an end sorts before a start at the same moment
        now += delta
        best = max(best, now)
    return best


@dataclass
class StudyTime:
    """A study's training stages as the store holds them, beside those its params name."""

    name: str
    train: list[StageTime]
    expected: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        attempts = [a for s in self.train for a in s.attempts if a.end_ms is not None]
        first = min((a.start_ms for a in attempts), default=None)
        last = max((a.end_ms for a in attempts), default=None)
        logged = {s.stage for s in self.train}
        return {
            "study": self.name,
            "first_start": _iso(first), "last_end": _iso(last),
            "wall_seconds": None if first is None else round((last - first) / 1000, 1),
            "training_runs_finished": sum(s.finished for s in self.train),
            "training_runs_unfinished": [s.stage for s in self.train if not s.finished],
            "training_runs_not_in_store": [s for s in self.expected if s not in logged],
            "training_seconds": round(sum(s.seconds for s in self.train), 1),
            "most_training_runs_at_once": most_at_once([(a.start_ms, a.end_ms)
                                                       for a in attempts]),
            "hosts": sorted({a.host for a in attempts}),
            "threads_per_run": sorted({a.threads for a in attempts}),
            "train": [s.summary() for s in self.train],
        }


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def study_time(name: str, tracking_uri: str, expected: Sequence[str] = ()) -> StudyTime:
    """The study's training stages as its MLflow experiment ``<name>/train`` holds them in the
    store at ``tracking_uri``; ``expected``: the training stages its params name. (Evaluation
    stages are left out: their MLflow runs open only to log the results.)"""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    return StudyTime(name, stage_times(client, f"{name}/train"), list(expected))


def render(record: dict[str, Any]) -> str:
    """The record as Markdown: one line for the study, a table of its training stages."""
    def minutes(s: float) -> str:
        return f"{s / 60:.0f} min"

    lines = [f"Study `{record['study']}`: {record['training_runs_finished']} training run(s) "
             f"finished, {minutes(record['training_seconds'])} of training in all; "
             f"{record['first_start']} to {record['last_end']}"
             + ("" if record["wall_seconds"] is None else
                f" ({record['wall_seconds'] / 3600:.1f} h of wall time)")
             + f", at most {record['most_training_runs_at_once']} training run(s) at once, "
             f"torch threads per run {', '.join(record['threads_per_run']) or '-'}, "
             f"host(s) {', '.join(record['hosts']) or '-'}.", "",
             "| stage | finished | training time | attempts | vector steps per attempt |",
             "|---|---|---:|---:|---|"]
    for s in record["train"]:
        spans = ", ".join(f"{r['resumed_at']:,}-{r['last_step']:,}" for r in s["runs"])
        lines.append(f"| {s['stage']} | {'yes' if s['finished'] else 'no'} | "
                     f"{minutes(s['seconds'])} | {s['attempts']} | {spans} |")
    for stage in record["training_runs_not_in_store"]:
        lines.append(f"| {stage} | no run in this store | | | |")
    return "\n".join(lines) + "\n"


def write(record: dict[str, Any], path: Path) -> None:
    """The record as JSON at ``path``, written whole or not at all."""
    from ..core.files import write_json

    write_json(path, record, role="study time record")
