"""The power of a study's paired contrast and the pairs a next study needs
(ptsl.report.power, python -m ptsl.tools.power), checked against simulated studies and the
numbers mt10-b1280's pre-registration was planned with."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ptsl.report.power import paired_power, pairs_needed, sd_upper_bound, smallest_effect
from ptsl.tools import power as tool

from ..conftest import ROOT


@pytest.mark.parametrize("n, effect, sd", [(5, 0.06, 0.051), (8, 0.05, 0.104), (12, -0.03, 0.05)])
def test_the_power_is_how_often_simulated_studies_reject_no_difference(n, effect, sd):
    # 20,000 studies of n normal differences, each tested as the report tests its contrasts.
    rng = np.random.default_rng(0)
    d = rng.normal(effect, sd, size=(20_000, n))
    rejected = stats.ttest_1samp(d, 0.0, axis=1).pvalue < 0.05
    assert paired_power(n, effect, sd) == pytest.approx(rejected.mean(), abs=0.012)


def test_no_difference_is_rejected_at_the_tests_level():
    assert paired_power(8, 0.0, 0.1) == pytest.approx(0.05, abs=1e-9)
    assert paired_power(8, 0.0, 0.1, alpha=0.1) == pytest.approx(0.1, abs=1e-9)


def test_the_pairs_needed_are_the_fewest_that_reach_the_power():
    for effect, sd in ((0.06, 0.051), (0.05, 0.104), (0.09, 0.141)):
        n = pairs_needed(effect, sd)
        assert paired_power(n, effect, sd) >= 0.8 > paired_power(n - 1, effect, sd)
    # mt10-b1280's plan (PREREGISTRATION.md): 8 pairs for 0.06 at mt10-cpu's sd 0.051; its
    # result's spread (sd 0.1045) needs 37 for a gain of 0.05.
    assert pairs_needed(0.06, 0.051) == 8 and pairs_needed(0.05, 0.1045) == 37
    assert pairs_needed(0.0, 0.1) is None and pairs_needed(0.001, 1.0, most=50) is None


def test_the_sds_upper_bound_covers_the_true_sd_at_its_level():
    rng = np.random.default_rng(1)
    samples = rng.normal(0.0, 0.1, size=(20_000, 5))
    bounds = np.array([sd_upper_bound(s, 5) for s in samples.std(axis=1, ddof=1)])
    assert (bounds >= 0.1).mean() == pytest.approx(0.8, abs=0.01)
    assert sd_upper_bound(0.051, 5) == pytest.approx(0.0794, abs=1e-4)  # the pre-registration's 0.080


def test_a_study_gives_a_line_per_contrast_and_gain(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert tool.main(["mt10-b1280", "--effect", "0.05"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("| CARE") or
             line.startswith("| MT-SAC")]
    # Its rows' own scores are in the contrasts CSV: the unpaired spread (0.091) is the smaller.
    assert lines[0] == ("| CARE+PTSL − CARE (primary) | 8 | 0.104 | 0.091 | unpaired 0.091 "
                        "[0.123] | 0.05 | 0.22 | 29 | 50 |")
    assert len(lines) == 3  # the study's three contrasts


def test_a_given_spread_needs_no_study(capsys):
    assert tool.main(["--sd", "0.051", "--pairs", "5", "--effect", "0.06"]) == 0
    out = capsys.readouterr().out
    assert "| given | 5 | 0.051 | — | paired 0.051 [0.079] | 0.06 | 0.52 | 8 | 16 |" in out
    assert "- given: 0.086 at its 5 pairs and paired sd 0.051" in out


def test_a_contrast_without_spread_says_so():
    out = tool.table([tool.Spread("A − B", 5, 0.0)], (0.05,), 0.8, 0.05, 0.8)
    assert out.splitlines()[-1] == ("| A − B | 5 | 0.000 | — | no spread to plan from | 0.05 | — "
                                    "| — | — |")


def test_the_plan_takes_the_smaller_spread_and_says_which():
    # mt10-b1280's primary: its rows' scores correlated -0.32 across seeds, so pairing widened
    # the spread (paired 0.104, unpaired 0.091).
    assert tool.Spread("x", 8, 0.104, 0.091).planned == ("unpaired", 0.091)
    assert tool.Spread("x", 8, 0.05, 0.09).planned == ("paired", 0.05)
    assert tool.Spread("x", 8, 0.05).planned == ("paired", 0.05)


def test_the_smallest_effect_is_where_the_power_reaches_its_target():
    for n, sd in ((8, 0.1045), (5, 0.051), (24, 0.2)):
        e = smallest_effect(n, sd)
        assert paired_power(n, e, sd) == pytest.approx(0.8, abs=1e-6)
        assert paired_power(n, 0.95 * e, sd) < 0.8
    assert smallest_effect(8, 0.1045) == pytest.approx(0.121, abs=5e-4)  # the v2 study's plan


def test_a_gain_far_above_the_spread_has_power_one_not_nan():
    # scipy's noncentral t gives NaN for the far tail at a noncentrality of 13.5.
    assert paired_power(8, 0.5, 0.1045) == pytest.approx(1.0)
    assert paired_power(8, -0.5, 0.1045) == pytest.approx(1.0)
