"""Paired contrasts under a table (ptsl.report.contrasts): per-seed differences of each run's
mean over tasks, their mean and Student t interval, the sentence that reads them, the tasks no
run learned left out in a second column, and the params that name them."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy import stats

from ptsl.core.errors import ConfigError
from ptsl.ops.params import parse_params
from ptsl.ops.paths import PUBLISHED
from ptsl.report.comparison import beside
from ptsl.report.contrasts import (CSV_COLUMNS, contrast_groups, learned_tasks,
                                   paired_contrasts, t_interval, verdict)
from ptsl.report.published import Published
from ptsl.report.stats import scores_at
from ptsl.report.tables import write_reports

from ..conftest import ROOT
from .report_data import RAW, records

PUB = Published.load(ROOT / PUBLISHED)
ROWS = ["mt10_care", "mt10_care_ptsl", "mt10_mtsac"]


def _params(contrasts, seeds=(1, 2, 3, 4), **table):
    raw = copy.deepcopy(RAW)
    raw["seeds"] = raw["long_seeds"] = list(seeds)
    for budget in raw["budgets"].values():
        budget["seeds"] = budget["long_seeds"] = list(seeds)
    raw["tables"] = {"t": {"title": "T", "rows": ROWS, "contrasts": contrasts, **table}}
    raw["report"].update({"bootstrap_reps": 50, "metric": "training"})
    return parse_params(raw)


CONTRASTS = [{"row": "mt10_care_ptsl", "minus": "mt10_care", "primary": True},
             {"row": "mt10_mtsac", "minus": "mt10_care"}]


def test_each_contrast_is_the_per_seed_difference_of_run_means_with_a_t_interval():
    p = _params(CONTRASTS)
    table = p.tables["t"]
    recs = records(p, episodes=lambda s: 0 if s == 0 else 4)
    step = p.table_step(table)
    got = paired_contrasts(p, table, recs.curves, beside(p, table, PUB))
    assert [(c.row, c.minus, c.primary) for c in got] == [
        ("mt10_care_ptsl", "mt10_care", True), ("mt10_mtsac", "mt10_care", False)]
    for c in got:
        a = scores_at(recs.curves, c.row, p.seeds, step, "final", "training").values
        b = scores_at(recs.curves, c.minus, p.seeds, step, "final", "training").values
        np.testing.assert_allclose(c.differences, a.mean(axis=1) - b.mean(axis=1))
        assert c.seeds == (1, 2, 3, 4)
        ci = stats.ttest_1samp(c.differences, 0.0).confidence_interval(0.95)
        np.testing.assert_allclose(c.interval(), (ci.low, ci.high))


def test_the_sentence_reads_the_interval():
    p = _params(CONTRASTS)
    recs = records(p, episodes=lambda s: 0 if s == 0 else 4)
    c = paired_contrasts(p, p.tables["t"], recs.curves, beside(p, p.tables["t"], PUB))[0]
    labels = {"mt10_care_ptsl": "A", "mt10_care": "B"}
    above = type(c)(**{**c.__dict__, "differences": (0.1, 0.12, 0.09, 0.11), "published": 0.2})
    assert verdict(above, labels).startswith("A minus B: +0.105 [")
    assert "A is above B: the interval lies above 0" in verdict(above, labels)
    assert "the published difference, +0.20, is outside it" in verdict(above, labels)
    below = type(c)(**{**c.__dict__, "differences": (-0.1, -0.12, -0.09, -0.11)})
    assert "A is below B" in verdict(below, labels)
    across = type(c)(**{**c.__dict__, "differences": (0.1, -0.12, 0.09, -0.11)})
    assert "not told apart: the interval spans 0" in verdict(across, labels)
    assert np.isnan(t_interval([0.3])[0])


def test_tasks_no_run_learned_are_named_and_left_out_of_the_second_column():
    p = _params(CONTRASTS)
    recs = records(p, episodes=lambda s: 0 if s == 0 else 4)
    curves = recs.curves.copy()
    for col in ("success/task3-v3", "train_success/task3-v3"):
        curves.loc[curves[col].notna(), col] = 0.0  # no run ever succeeds on task3
    learned = learned_tasks(curves, ROWS, p.seeds, p.table_step(p.tables["t"]))
    assert "task3-v3" not in learned and len(learned) == 9
    c = paired_contrasts(p, p.tables["t"], curves, beside(p, p.tables["t"], PUB))[0]
    np.testing.assert_allclose(c.learned_differences, np.array(c.differences) * 10 / 9)


def test_the_reports_carry_the_contrasts(tmp_path):
    p = _params(CONTRASTS)
    recs = records(p, episodes=lambda s: 0 if s == 0 else 4)
    write_reports(p, recs, PUB, tmp_path)
    table = (tmp_path / "tables" / "t.md").read_text()
    assert "**Paired contrasts**" in table and "**Primary.** CARE+PTSL minus CARE" in table
    csv = (tmp_path / "tables" / "t_contrasts.csv").read_text().splitlines()
    assert len(csv) == 1 + 2 * 4  # a line per contrast and seed
    results = (tmp_path / "results.md").read_text()
    summary = results[:results.index("<!-- summary:end -->")]
    assert "**Primary.**" in results and "**Primary.**" not in summary  # the README's own block
    # The contrasts' figure, linked beside the table's other figures.
    assert (tmp_path / "figures" / "t_contrasts.png").read_bytes()[:4] == b"\x89PNG"
    assert "![T paired contrasts](figures/t_contrasts.png)" in results


def test_contrasts_without_pairs_are_reported_and_drawn(tmp_path):
    # No training episode finished by the step: no seed has a training score for both rows.
    p = _params(CONTRASTS)
    write_reports(p, records(p, episodes=lambda s: 0), PUB, tmp_path)
    assert "0 pair(s), too few for an interval" in (tmp_path / "tables" / "t.md").read_text()
    assert (tmp_path / "figures" / "t_contrasts.png").read_bytes()[:4] == b"\x89PNG"
    # The CSV keeps its header with no line under it, so its readers (the README's contrasts
    # block, the power tool) read it back as no contrast instead of failing on an empty file.
    csv = tmp_path / "tables" / "t_contrasts.csv"
    assert csv.read_text() == ",".join(CSV_COLUMNS) + "\n"
    assert list(contrast_groups(csv)) == []


def test_an_unpublished_row_stands_beside_no_published_value():
    # A study's control runs a method the paper reports, at a width it does not: the paper's
    # value stands beside the method's own row only, and no contrast with the control is
    # given a published difference.
    p = _params(CONTRASTS)
    assert {name for name, _ in beside(p, p.tables["t"], PUB).cells} == set(ROWS)
    p = _params(CONTRASTS, unpublished=["mt10_care"])
    table = p.tables["t"]
    shown = beside(p, table, PUB)
    assert {name for name, _ in shown.cells} == {"mt10_care_ptsl", "mt10_mtsac"}
    got = paired_contrasts(p, table, records(p).curves, shown)
    assert [c.published for c in got] == [None, None]
    p = _params(CONTRASTS, unpublished=["mt10_mtsac"])
    got = paired_contrasts(p, p.tables["t"], records(p).curves, beside(p, p.tables["t"], PUB))
    assert got[0].published is not None and got[1].published is None


def test_an_unpublished_row_must_be_a_row_of_the_table():
    with pytest.raises(ConfigError) as err:
        _params(CONTRASTS, unpublished=["mt10_softmod"])
    assert str(err.value) == ("tables.t.unpublished: 'mt10_softmod' is not a row of the table; "
                              "allowed: mt10_care, mt10_care_ptsl, mt10_mtsac")


@pytest.mark.parametrize("contrasts, message", [
    ([{"row": "mt10_softmod", "minus": "mt10_care"}],
     "tables.t.contrasts.row: 'mt10_softmod' is not a row of the table; allowed: mt10_care, "),
    ([{"row": "mt10_care", "minus": "mt10_care"}], "tables.t.contrasts: 'mt10_care' minus itself"),
    ([{"row": "mt10_care_ptsl", "minus": "mt10_care", "primary": True},
      {"row": "mt10_mtsac", "minus": "mt10_care", "primary": True}],
     "tables.t.contrasts.primary: at most one primary contrast, got 2"),
    ([{"row": "mt10_care_ptsl", "minus": "mt10_care", "less": 1}],
     "tables.t.contrasts.less: unknown key"),
])
def test_a_bad_contrast_is_one_line_naming_its_key(contrasts, message):
    with pytest.raises(ConfigError) as err:
        _params(contrasts)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)
