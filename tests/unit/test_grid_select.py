"""The grid's --only: which training stages a selection keeps, and a pattern that names none."""

from __future__ import annotations

import pytest

from ptsl.ops import grid

EVERY = ["train@mt10_mtsac-1", "train@mt10_care-1", "train_ptsl@mt10_care_ptsl-1",
         "train@mt10_mtsac-2", "train@mt10_care-2", "train_ptsl@mt10_care_ptsl-2"]


def test_patterns_keep_their_stale_and_cached_stages_in_order():
    stale = ["train@mt10_care-1", "train@mt10_mtsac-2", "train_ptsl@mt10_care_ptsl-2"]
    cached = ["train@mt10_care-2"]
    assert grid.select_stages(["train@mt10_mtsac-*", "*-2"], stale, cached, EVERY) == (
        ["train@mt10_mtsac-2", "train_ptsl@mt10_care_ptsl-2"], ["train@mt10_care-2"])
    assert grid.select_stages(["*care_ptsl*"], stale, cached, EVERY) == (
        ["train_ptsl@mt10_care_ptsl-2"], [])


def test_a_selection_of_up_to_date_stages_selects_nothing():
    assert grid.select_stages(["train@mt10_mtsac-1"], ["train@mt10_care-1"], [], EVERY) == ([], [])


def test_a_pattern_that_names_no_training_stage_is_one_line():
    with pytest.raises(grid.GridError, match=r"--only 'train@mt10_sac-\*' matches no training "
                                             r"stage here; they are train@mt10_mtsac-1, "):
        grid.select_stages(["train@mt10_mtsac-*", "train@mt10_sac-*"], [], [], EVERY)


def test_only_is_repeatable_on_the_command_line():
    args = grid.parse_args(["--only", "*-1", "--only", "train@mt10_care-*", "--dry"])
    assert args.only == ["*-1", "train@mt10_care-*"] and args.dry
    assert grid.parse_args([]).only == []


def test_a_training_stage_is_followed_by_its_evaluation_where_the_pipeline_has_one():
    names = [*EVERY, "evaluate@mt10_mtsac-1", "evaluate_ptsl@mt10_care_ptsl-1", "aggregate"]
    assert grid.evaluation_of("train@mt10_mtsac-1", names) == ("evaluate@mt10_mtsac-1",)
    assert grid.evaluation_of("train_ptsl@mt10_care_ptsl-1", names) == (
        "evaluate_ptsl@mt10_care_ptsl-1",)
    # A PTSL run's task branches come after its evaluation, where the pipeline has them.
    assert grid.evaluation_of("train_ptsl@mt10_care_ptsl-1",
                              [*names, "branches_ptsl@mt10_care_ptsl-1"]) == (
        "evaluate_ptsl@mt10_care_ptsl-1", "branches_ptsl@mt10_care_ptsl-1")
    assert grid.evaluation_of("train@mt10_care-1", names) == ()  # none in this pipeline
    assert grid.training_stages(names) == EVERY


def test_each_training_stage_names_the_task_list_its_run_reads():
    from types import SimpleNamespace

    params = SimpleNamespace(experiments={"mt10_mtsac": SimpleNamespace(benchmark="mt10"),
                                          "mt50_care": SimpleNamespace(benchmark="mt50")})
    assert grid.task_lists(["train@mt10_mtsac-1", "train@mt50_care-3", "train@mt10_mtsac-2"],
                           params) == {"train@mt10_mtsac-1": ("mt10", 1),
                                       "train@mt50_care-3": ("mt50", 3),
                                       "train@mt10_mtsac-2": ("mt10", 2)}


def test_a_task_list_that_cannot_be_built_ahead_says_why(tmp_path):
    """The grid's early build of a task list returns the error (the stages then meet it
    themselves, with their own message) instead of failing the stages that wait for it."""
    assert grid._build_task_list("reach-v3", 1, str(tmp_path)) == ""
    assert list(tmp_path.glob("reach-v3-seed1-*.pkl"))
    assert grid._build_task_list("no-such-task-v3", 1, str(tmp_path)).startswith("ValueError")
