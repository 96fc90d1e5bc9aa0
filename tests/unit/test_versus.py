"""One setting against another, method by method (ptsl.report.versus): a study's runs beside the
runs of the study it repeats, read back from that study's committed runs.csv."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ptsl.ops.params import load_params
from ptsl.report.contrasts import t_interval
from ptsl.report.datafiles import long_frame
from ptsl.report.versus import curves_from_long, read_runs, versus, versus_markdown

from ..conftest import ROOT
from . import report_data

B1280 = ROOT / "studies" / "mt10-b1280"


def test_the_long_file_reads_back_as_the_curves_it_was_written_from():
    p = report_data.params()
    records = report_data.records(p)
    back = curves_from_long(long_frame(p, records))
    cols = [c for c in back.columns if c.startswith(("success/", "train_success/"))]
    want = records.curves.set_index(["experiment", "seed", "step"])[cols].sort_index()
    got = back.set_index(["experiment", "seed", "step"])[cols].sort_index()
    pd.testing.assert_frame_equal(got, want, check_names=False)


def _b1280():
    params = load_params(B1280 / "params.yaml")
    table = params.tables["mt10_b1280"]
    return params, table, read_runs(B1280 / "reports" / "data" / "runs.csv")


def test_a_study_against_itself_differs_by_nothing_and_its_interaction_is_zero():
    params, table, curves = _b1280()
    view = versus(params, table, curves, curves)
    assert all(d == 0 for r in view.rows for d in r.difference.values)
    assert all(v == 0 for i in view.interactions for v in i.estimate.values)
    # Each row's mean is the table's (training success at 100k, each run's mean over tasks).
    care = next(r for r in view.rows if r.row == "mt10_care")
    assert care.this.mean == pytest.approx(0.277, abs=5e-4)
    assert len(care.this.seeds) == 8


def test_differences_interactions_and_the_floor_are_read_seed_by_seed():
    """The other study's CARE runs score 0 on every task: CARE's difference is its own score,
    the primary contrast's interaction is minus CARE's score, and every task CARE ever
    succeeds on comes off the floor."""
    params, table, curves = _b1280()
    other = curves.copy()
    care = other["experiment"] == "mt10_care"
    tasks = [c for c in other.columns if c.startswith("train_success/")]
    other.loc[care, tasks] = other.loc[care, tasks].where(other.loc[care, tasks].isna(), 0.0)
    view = versus(params, table, curves, other)
    row = next(r for r in view.rows if r.row == "mt10_care")
    assert row.difference.values == row.this.values and row.other.mean == 0
    assert row.difference.interval == pytest.approx(t_interval(row.this.values))
    primary = next(i for i in view.interactions if i.primary)
    assert (primary.row, primary.minus) == ("mt10_care_ptsl", "mt10_care")
    assert primary.estimate.values == pytest.approx([-v for v in row.this.values])
    assert set(row.off_the_floor()) == {t for t, v in zip(row.tasks, row.this_tasks) if v > 0}
    labels = {n: params.experiments[n].label or n for n in table.rows}
    md = versus_markdown(view, labels, "v2", "v1", "Reward version", "mt10-b1280", "training",
                         100_000)
    assert "| CARE | 0.277 [" in md and "(CARE+PTSL − CARE) (primary)" in md
    assert f"- CARE: v2 brings {', '.join(row.off_the_floor())} off the floor" in md


def test_another_studys_tasks_or_runs_must_match():
    params, table, curves = _b1280()
    short = curves[curves["seed"] != 8]
    with pytest.raises(ValueError, match="seed 8"):
        versus(params, table, curves, short)
    with pytest.raises(FileNotFoundError, match="make study-"):
        read_runs(ROOT / "studies" / "nope" / "runs.csv")
    assert np.isnan(t_interval([0.1])[0])


def test_a_table_with_versus_reports_it_from_the_other_studys_data_file(tmp_path):
    """The aggregate of a study whose table names ``versus``: its results and the table's
    Markdown hold the view, with a CSV and a figure, read from the other study's runs.csv; the
    primary contrast carries its equivalence test."""
    from ptsl.core.files import write_atomic
    from ptsl.ops.paths import PUBLISHED
    from ptsl.report.published import Published
    from ptsl.report.tables import write_reports

    import copy

    from ptsl.ops.params import parse_params

    raw = copy.deepcopy(report_data.RAW)
    rows = list(raw["tables"]["mt10_200k"]["rows"])[:2]
    raw["tables"] = {"t": {"title": "T", "rows": rows, "equivalence": 0.05,
                           "contrasts": [{"row": rows[1], "minus": rows[0], "primary": True}],
                           "versus": {"study": "before", "setting": "Reward version",
                                      "this": "v2", "other": "v1"}}}
    raw["report"].update({"bootstrap_reps": 50, "metric": "training"})
    raw["seeds"] = raw["budgets"]["small"]["seeds"] = [1, 2, 3]
    p = parse_params(raw)
    other = report_data.records(p, seed=1)
    write_atomic(tmp_path / "studies" / "before" / "reports" / "data" / "runs.csv",
                 long_frame(p, other).to_csv(index=False))
    here = tmp_path / "studies" / "after"
    others = {"before": read_runs(tmp_path / "studies" / "before" / "reports" / "data" /
                                  "runs.csv")}
    write_reports(p, report_data.records(p), Published.load(ROOT / PUBLISHED), here / "reports",
                  versus_runs=others)
    md = (here / "reports" / "tables" / "t.md").read_text()
    assert "**Reward version: v2 against v1** (study `before` under v1" in md
    assert "Interaction: each contrast under v2 minus under v1" in md
    assert "Equivalence (two one-sided paired t tests at 5%, margin ±0.05)" in md
    assert (here / "reports" / "figures" / "t_versus.png").stat().st_size > 0
    frame = pd.read_csv(here / "reports" / "tables" / "t_versus.csv")
    assert set(frame["kind"]) == {"row", "interaction"}
