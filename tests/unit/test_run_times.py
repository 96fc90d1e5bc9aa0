"""A restored run's start and end (:mod:`ptsl.ops.run_times`): from a study's time record where
it holds the stage, else no end time and a tag that says why; a record that is not one is one
line naming the file."""

from __future__ import annotations

import json

import pytest

from ptsl.core.errors import CorruptFileError
from ptsl.ops.run_times import TIME_RECORD, read_record, run_time
from ptsl.ops.study_time import Attempt, StageTime, StudyTime, write

NOW = 1_800_000_000_000


def attempt(start: int, end: int | None, status: str = "FINISHED") -> Attempt:
    return Attempt(run_id=f"r{start}", status=status, start_ms=start, end_ms=end, host="h",
                   threads="1", resumed_at=0, last_step=100)


@pytest.fixture
def record(tmp_path):
    stages = [StageTime("train@a-1", (attempt(1_000_000, 1_600_000),)),
              StageTime("train@a-2", (attempt(2_000_000, 2_060_000, "KILLED"),
                                      attempt(2_100_000, 2_130_500))),
              StageTime("train@a-3", (attempt(3_000_000, None, "RUNNING"),))]
    write(StudyTime("s", stages).record(), tmp_path / TIME_RECORD)
    return read_record(tmp_path)


def test_the_record_gives_each_finished_stage_its_attempts(record):
    assert record == {"train@a-1": [(1_000_000, 1_600_000)],
                      "train@a-2": [(2_000_000, 2_060_000), (2_100_000, 2_130_500)]}


def test_a_recorded_stage_starts_with_its_training_and_lasts_its_training_time(record):
    one = run_time("train@a-1", "train", record, "studies/s/time.json", NOW)
    assert (one.start_ms, one.end_ms) == (1_000_000, 1_600_000)
    assert one.note == ("trained 1970-01-01T00:16:40Z to 1970-01-01T00:26:40Z (10 min 0 s), as "
                        "studies/s/time.json records")
    two = run_time("train@a-2", "train", record, "studies/s/time.json", NOW)
    assert (two.start_ms, two.end_ms) == (2_000_000, 2_000_000 + 60_000 + 30_500)
    assert two.note.startswith("trained in 2 attempts, 1 min 30 s in all, the first from ")


def test_without_a_record_a_run_has_no_end_and_says_why(record):
    cases = [("train@a-3", "train", record, "not recorded: studies/s/time.json has no finished "
                                             "run of this stage"),
             ("train@a-4", "train", record, "not recorded: studies/s/time.json has no finished"),
             ("train@a-1", "train", None, "not recorded: no studies/s/time.json; started when"),
             ("evaluate@a-1", "evaluate", record, "not recorded: time records keep training "
                                                  "stages only")]
    for stage, kind, rec, words in cases:
        got = run_time(stage, kind, rec, "studies/s/time.json", NOW)
        assert (got.start_ms, got.end_ms) == (NOW, None), stage
        assert got.note.startswith(words), got.note
        assert got.note.endswith("no end time: MLflow shows no duration")


def test_no_record_is_none_and_a_broken_one_is_one_line(tmp_path):
    assert read_record(tmp_path) is None
    path = tmp_path / TIME_RECORD
    for text, detail in (("{", "Expecting property name"),
                         ('{"study": "s"}', "KeyError: 'train'"),
                         (json.dumps({"train": [{"stage": "x", "finished": True, "runs": [
                             {"start_ms": 5, "end_ms": 4}]}]}),
                          "stage x: an attempt ends before it starts")):
        path.write_text(text)
        with pytest.raises(CorruptFileError) as err:
            read_record(tmp_path)
        message = str(err.value)
        assert message.startswith(f"{path}: study time record is unreadable ("), message
        assert detail in message and "\n" not in message
        assert message.endswith("write it again with python -m ptsl.tools.study_time, or "
                                "remove it")
