"""The sentence under a table that says whether our rows rank as a published source ranks them
and which of our intervals overlap."""

from __future__ import annotations

import pandas as pd

from ptsl.ops.paths import PUBLISHED
from ptsl.report.comparison import Beside
from ptsl.report.published import Published
from ptsl.report.ranking import ranking_text

from ..conftest import ROOT

SOURCE = next(s for s in Published.load(ROOT / PUBLISHED).sources if s.name == "ptsl_figure")


def _frame(rows: dict[str, tuple[float, float, float, float | None]],
           seeds: int = 5) -> pd.DataFrame:
    """label -> (ours the source's way, our interval low, high, published)."""
    return pd.DataFrame([
        {"experiment": label.lower(), "label": label, "step": 100_000, "seeds": seeds,
         "training_as_published": ours, "training_mean_low": low, "training_mean_high": high,
         "published_training": published,
         "published_training_source": None if published is None else SOURCE.name}
        for label, (ours, low, high, published) in rows.items()])


def test_the_order_and_the_overlapping_intervals_are_named():
    frame = _frame({"A": (0.30, 0.25, 0.35, 0.23), "B": (0.20, 0.15, 0.26, 0.25),
                    "C": (0.40, 0.37, 0.45, 0.34), "D": (0.10, 0.05, 0.14, None)})
    text = ranking_text(frame, Beside(step=100_000, refs=[SOURCE]), "training", "final")
    assert text == (
        "Ranked by training success at 100,000 steps per task (mean over seeds of each run's "
        "mean over tasks at the step): ours C 0.400 > A 0.300 > B 0.200; [1] C 0.34 > B 0.25 > "
        "A 0.23. [1]'s order holds for 2 of the 3 pairs it orders; the 95% intervals of our "
        "means overlap for A and B (1 of 3 pairs).")


def test_no_interval_is_named_for_another_kind_and_nothing_for_one_row():
    frame = _frame({"A": (0.30, 0.25, 0.35, 0.23), "B": (0.20, 0.15, 0.26, 0.25)})
    shown = Beside(step=100_000, refs=[SOURCE])
    assert ranking_text(frame, shown, "training", "best").endswith(
        "[1]'s order holds for 0 of the 1 pairs it orders.")
    assert ranking_text(frame.iloc[:1], shown, "training", "final") is None


def test_one_seed_claims_no_separation():
    frame = _frame({"A": (0.30, 0.30, 0.30, 0.23), "B": (0.20, 0.20, 0.20, 0.25)}, seeds=1)
    text = ranking_text(frame, Beside(step=100_000, refs=[SOURCE]), "training", "final")
    assert text.endswith("[1]'s order holds for 0 of the 1 pairs it orders; with one seed a row "
                         "has no interval, so none of these orders is told apart.")


def test_ties_are_not_ranked_and_another_step_is_named():
    frame = _frame({"A": (0.0, 0.0, 0.0, 0.23), "B": (0.0, 0.0, 0.0, 0.25)})
    text = ranking_text(frame, Beside(step=200_000, refs=[SOURCE]), "training", "final")
    assert text.startswith("Ranked by training success ours at 100,000 steps per task, [1]'s at "
                           "200,000 (mean over seeds of each run's mean over tasks at the step): "
                           "ours A 0.000 = B 0.000; [1] B 0.25 > A 0.23.")
