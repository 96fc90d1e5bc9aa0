"""When a run DVC restored was made: the start and end a restored MLflow run carries.

A restored run (:mod:`ptsl.ops.restored`) is logged long after its stage ran, on another store.
A study keeps the times of its training in ``studies/<name>/time.json`` (written from the store
its stages logged to by ``python -m ptsl.tools.study_time``: every attempt of every training
stage, with its start and end), so such a run gets the start of its training and, as its
duration, the training time the record gives; where a stage ran in several attempts (one killed,
the next resuming it) the run starts with the first and lasts their sum, the gaps between them
left out. Where nothing records the time (an evaluation stage, the project's own pipeline, a
stage trained against another store) the run starts when it is logged and has no end time, so
MLflow shows no duration rather than 0 ms. Either way tag :data:`TAG` says which, in words.

Nothing here reaches a stage's outputs: the times live in the MLflow store only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import CorruptFileError

#: A study's record of its training times, in the study's folder.
TIME_RECORD = "time.json"
#: The restored run's tag that says where its start and end come from.
TAG = "ptsl.run_time"
_ROLE = "study time record"


@dataclass(frozen=True)
class RunTime:
    """A restored run's start and end (ms since the epoch; no end where none is recorded) and
    the words of its :data:`TAG`."""

    start_ms: int
    end_ms: int | None
    note: str


def read_record(folder: Path) -> dict[str, list[tuple[int, int]]] | None:
    """The finished training stages of ``folder``'s time record, each with its attempts' (start,
    end) in ms; None where the folder has no record. A record that is not what
    ``python -m ptsl.tools.study_time`` writes raises :class:`CorruptFileError` (one line)."""
    path = folder / TIME_RECORD
    if not path.is_file():
        return None
    fix = "write it again with python -m ptsl.tools.study_time, or remove it"
    try:
        record = json.loads(path.read_text())
        stages: dict[str, list[tuple[int, int]]] = {}
        for entry in record["train"]:
            if not entry["finished"]:
                continue  # the outputs in the workspace came from a later, other run
            spans = [(int(r["start_ms"]), int(r["end_ms"])) for r in entry["runs"]
                     if r["end_ms"] is not None]
            if any(end < start for start, end in spans):
                raise ValueError(f"stage {entry['stage']}: an attempt ends before it starts")
            stages[str(entry["stage"])] = spans
    except (ValueError, KeyError, TypeError) as exc:  # JSON errors are ValueErrors
        detail = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
        raise CorruptFileError(path, _ROLE, detail.splitlines()[0], fix) from None
    return stages


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(ms: int) -> str:
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def run_time(stage: str, kind: str, record: Mapping[str, list[tuple[int, int]]] | None,
             path: str, now_ms: int | None = None) -> RunTime:
    """The start, end and :data:`TAG` words of the restored run of ``stage`` (of ``kind``
    ``train`` or ``evaluate``), from ``record`` (:func:`read_record`; None where the pipeline
    folder has none), the time record at ``path`` (as the words name it)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    untimed = "no end time: MLflow shows no duration"
    if kind != "train":
        return RunTime(now, None, "not recorded: time records keep training stages only; "
                                  f"started when it was logged, {untimed}")
    if record is None:
        return RunTime(now, None, f"not recorded: no {path}; started when it was logged, "
                                  f"{untimed}")
    spans = record.get(stage)
    if not spans:
        return RunTime(now, None, f"not recorded: {path} has no finished run of "
                                  f"this stage (trained against another store); started when "
                                  f"it was logged, {untimed}")
    start = min(s for s, _ in spans)
    spent = sum(e - s for s, e in spans)
    if len(spans) == 1:
        note = (f"trained {_iso(start)} to {_iso(start + spent)} ({_duration(spent)}), as "
                f"{path} records")
    else:
        note = (f"trained in {len(spans)} attempts, {_duration(spent)} in all, the first from "
                f"{_iso(start)}, the last until {_iso(max(e for _, e in spans))}, as "
                f"{path} records; the run's end is its start plus that time")
    return RunTime(start, start + spent, note)
