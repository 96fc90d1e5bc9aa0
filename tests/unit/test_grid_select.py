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
    assert grid.evaluation_of("train@mt10_care-1", names) == ()  # none in this pipeline
    assert grid.training_stages(names) == EVERY
