"""Scores at a reported step, the IQM and the stratified bootstrap (rliable's convention)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from ptsl.report.stats import (RowStats, Scores, iqm, mean_score, scores_at, stratified_bootstrap_ci,
                        summarize, summarize_available, task_columns)

TASKS = ["reach-v3", "push-v3"]


def _curves() -> pd.DataFrame:
    """Two seeds of one MT2-like run, three evaluations each, plus another benchmark's run."""
    rows = []
    # seed 1: reach peaks at step 20 and drops at 30; push rises monotonically.
    for step, reach, push in [(10, 0.2, 0.0), (20, 0.9, 0.1), (30, 0.5, 0.3)]:
        rows.append({"experiment": "a", "seed": 1, "step": step, "env_steps": step * 2,
                     "success": (reach + push) / 2, "return": 0.0,
                     "success/reach-v3": reach, "success/push-v3": push})
    # seed 2: push peaks early.
    for step, reach, push in [(10, 0.1, 0.7), (20, 0.2, 0.4), (30, 0.3, 0.6)]:
        rows.append({"experiment": "a", "seed": 2, "step": step, "env_steps": step * 2,
                     "success": (reach + push) / 2, "return": 0.0,
                     "success/reach-v3": reach, "success/push-v3": push})
    # A run on a different task set: its column is NaN for "a" and must not become a task of "a".
    rows.append({"experiment": "b", "seed": 1, "step": 30, "env_steps": 60, "success": 1.0,
                 "return": 0.0, "success/door-open-v3": 1.0})
    return pd.DataFrame(rows)


def test_scores_at_final_takes_the_exact_step():
    s = scores_at(_curves(), "a", [1, 2], 30, kind="final")
    assert isinstance(s, Scores)
    assert s.tasks == tuple(TASKS) and s.seeds == (1, 2)
    np.testing.assert_allclose(s.values, [[0.5, 0.3], [0.3, 0.6]])


def test_scores_at_best_takes_the_best_evaluation_so_far():
    """Seed 1's best mean is at step 20 (reach 0.9, push 0.1), not the per-task peaks
    (0.9, 0.3); seed 2's is at step 30 (mean 0.45 beats 0.4 at step 10)."""
    s = scores_at(_curves(), "a", [1, 2], 30, kind="best")
    np.testing.assert_allclose(s.values, [[0.9, 0.1], [0.3, 0.6]])
    # Evaluations after the reported step do not count.
    early = scores_at(_curves(), "a", [1, 2], 10, kind="best")
    np.testing.assert_allclose(early.values, [[0.2, 0.0], [0.1, 0.7]])


def test_scores_at_rows_follow_the_seed_order():
    s = scores_at(_curves(), "a", [2, 1], 30)
    np.testing.assert_allclose(s.values, [[0.3, 0.6], [0.5, 0.3]])
    assert s.seeds == (2, 1)


def test_scores_at_missing_step_names_run_and_existing_steps():
    with pytest.raises(ValueError, match=r"'a' seed 1 has no evaluation at step 25 "
                                         r"\(steps present: \[10, 20, 30\]\)"):
        scores_at(_curves(), "a", [1, 2], 25, kind="best")


def test_scores_at_missing_seed_or_experiment():
    with pytest.raises(ValueError, match=r"'a' seed 7 .*missing"):
        scores_at(_curves(), "a", [1, 7], 30)
    with pytest.raises(ValueError, match=r"'zzz'"):
        scores_at(_curves(), "zzz", [1], 30)
    with pytest.raises(ValueError, match="kind"):
        scores_at(_curves(), "a", [1], 30, kind="last")


def test_scores_at_duplicate_evaluation_is_an_error():
    c = _curves()
    c = pd.concat([c, c.iloc[[2]]], ignore_index=True)
    with pytest.raises(ValueError, match="2 evaluations at step 30"):
        scores_at(c, "a", [1], 30)


def _train_curves() -> pd.DataFrame:
    """Training success of run "a": seed 1's windows at steps 10 and 30 hold episodes, the one
    at 20 none (empty); seed 2 finished none before step 30."""
    c = _curves()
    nan = float("nan")
    train = {(1, 10): (0.4, 0.2), (1, 20): (nan, nan), (1, 30): (0.1, 0.1),
             (2, 10): (nan, nan), (2, 20): (nan, nan), (2, 30): (1.0, 0.5)}
    for (seed, step), (reach, push) in train.items():
        at = (c["experiment"] == "a") & (c["seed"] == seed) & (c["step"] == step)
        c.loc[at, "train_success/reach-v3"] = reach
        c.loc[at, "train_success/push-v3"] = push
        c.loc[at, "train_success"] = (reach + push) / 2
    c.loc[c["experiment"] == "b", "train_success/door-open-v3"] = 0.0
    return c


def test_training_scores_read_the_train_columns_of_the_run():
    c = _train_curves()
    assert task_columns(c, "a", "training") == ["train_success/reach-v3", "train_success/push-v3"]
    final = scores_at(c, "a", [1, 2], 30, "final", "training")
    assert final.tasks == tuple(TASKS)
    np.testing.assert_allclose(final.values, [[0.1, 0.1], [1.0, 0.5]])


def test_training_best_skips_empty_windows_and_final_may_be_empty():
    c = _train_curves()
    # Seed 1's best window up to step 20 is step 10's (step 20's is empty); seed 2 has none.
    best = scores_at(c, "a", [1, 2], 20, "best", "training")
    np.testing.assert_allclose(best.values[0], [0.4, 0.2])
    assert np.isnan(best.values[1]).all()
    final = scores_at(c, "a", [1, 2], 20, "final", "training")
    assert np.isnan(final.values).all()
    # summarize_available leaves the runs without a value out, and gives None without any.
    rng = np.random.default_rng(0)
    only_seed_1 = summarize_available(best, 100, rng)
    assert only_seed_1.n_seeds == 1 and only_seed_1.mean == pytest.approx(0.3)
    assert summarize_available(final, 100, rng) is None


def test_a_half_empty_training_row_is_an_error():
    c = _train_curves()
    at = (c["experiment"] == "a") & (c["seed"] == 1) & (c["step"] == 30)
    c.loc[at, "train_success/push-v3"] = float("nan")
    with pytest.raises(ValueError, match=r"no training success value at step 30 for tasks "
                                         r"\['push-v3'\]"):
        scores_at(c, "a", [1], 30, "final", "training")
    with pytest.raises(ValueError, match="metric"):
        scores_at(c, "a", [1], 30, "final", "train")


def test_iqm_is_the_mean_of_the_middle_half():
    x = np.array([[0.0, 9.0, 1.0, 2.0], [3.0, 4.0, 100.0, -50.0]])
    # Sorted: -50, 0, 1, 2, 3, 4, 9, 100 -> middle four 1, 2, 3, 4.
    assert iqm(x) == pytest.approx(2.5)
    # A stack of matrices gives one IQM each (used by the vectorised bootstrap).
    np.testing.assert_allclose(iqm(np.stack([x, x + 1.0])), [2.5, 3.5])
    assert mean_score(x) == pytest.approx(x.mean())


def _matrix(seed: int = 0, runs: int = 10, tasks: int = 50) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.0, 1.0, size=(runs, tasks))


def test_ci_contains_the_estimate_and_is_reproducible():
    x = _matrix()
    low, high = stratified_bootstrap_ci(x, iqm, 2000, np.random.default_rng(1))
    assert low < iqm(x) < high
    again = stratified_bootstrap_ci(x, iqm, 2000, np.random.default_rng(1))
    assert again == (low, high)
    other = stratified_bootstrap_ci(x, iqm, 2000, np.random.default_rng(2))
    assert other != (low, high)


def test_ci_is_degenerate_when_all_runs_agree():
    row = np.linspace(0.0, 1.0, 7)
    x = np.tile(row, (5, 1))
    low, high = stratified_bootstrap_ci(x, iqm, 500, np.random.default_rng(0))
    assert low == pytest.approx(iqm(x)) and high == pytest.approx(iqm(x))
    # One run: nothing to resample, the interval is the point estimate.
    low, high = stratified_bootstrap_ci(x[:1], mean_score, 100, np.random.default_rng(0))
    assert low == high == pytest.approx(row.mean())


def test_ci_narrows_with_more_runs_and_stabilises_with_more_reps():
    x = _matrix(runs=5, tasks=10)
    few = stratified_bootstrap_ci(x, mean_score, 2000, np.random.default_rng(0))
    # The same run distribution with four times the runs: interval about half as wide.
    many = stratified_bootstrap_ci(np.tile(x, (4, 1)), mean_score, 2000, np.random.default_rng(0))
    assert (many[1] - many[0]) < 0.7 * (few[1] - few[0])
    # More replicates: the bounds vary less from one rng seed to the next.
    def spread(reps: int) -> float:
        lows = [stratified_bootstrap_ci(x, mean_score, reps, np.random.default_rng(s))[0]
                for s in range(8)]
        return float(np.std(lows))
    assert spread(4000) < spread(50)


def test_bootstrap_is_stratified_by_task():
    # Column j only holds values j*100 + run; any resample must keep every value in its column.
    x = np.arange(4)[None, :] * 100.0 + np.arange(6)[:, None]
    seen = []

    def record(stack: np.ndarray) -> np.ndarray:
        seen.append(stack.copy())
        return stack.mean(axis=(-2, -1))

    stratified_bootstrap_ci(x, record, 300, np.random.default_rng(0))
    stack = np.concatenate(seen)
    assert stack.shape == (300, 6, 4)
    for j in range(4):
        assert set(np.unique(stack[:, :, j])) <= set(x[:, j])
    # Rows are drawn independently per column, not as whole runs.
    assert np.any(stack[:, :, 0] % 100 != stack[:, :, 1] % 100)


def test_bootstrap_checks_its_arguments():
    x = _matrix(runs=3, tasks=4)
    with pytest.raises(TypeError, match="Generator"):
        stratified_bootstrap_ci(x, iqm, 10, 0)
    with pytest.raises(ValueError, match="reduce"):
        stratified_bootstrap_ci(x, lambda s: float(np.mean(s)), 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="matrix"):
        stratified_bootstrap_ci(np.ones(3), iqm, 10, np.random.default_rng(0))


def test_bootstrap_is_fast():
    x = _matrix(runs=10, tasks=50)
    t0 = time.perf_counter()
    stratified_bootstrap_ci(x, iqm, 2000, np.random.default_rng(0))
    assert time.perf_counter() - t0 < 1.0


def test_summarize_on_a_known_matrix():
    x = np.array([[1.0, 0.0, 1.0, 0.0],    # run mean 0.5
                  [1.0, 1.0, 1.0, 1.0],    # run mean 1.0
                  [0.0, 0.0, 0.0, 0.0]])   # run mean 0.0
    r = summarize(Scores(values=x, tasks=("a", "b", "c", "d"), seeds=(1, 2, 3)), 500,
                  np.random.default_rng(0))
    assert isinstance(r, RowStats)
    assert r.mean == pytest.approx(0.5)
    assert r.std == pytest.approx(0.5)  # std(ddof=1) of 0.5, 1.0, 0.0
    # 12 values, six ones and six zeros: trim 3 each end -> three zeros and three ones.
    assert r.iqm == pytest.approx(0.5)
    assert r.iqm_low <= r.iqm <= r.iqm_high
    assert r.n_seeds == 3
    # The mean's interval: the same stratified bootstrap, drawn after the IQM's.
    rng = np.random.default_rng(0)
    stratified_bootstrap_ci(x, iqm, 500, rng)
    assert (r.mean_low, r.mean_high) == stratified_bootstrap_ci(x, mean_score, 500, rng)
    assert r.mean_low < r.mean < r.mean_high


def test_summarize_one_seed():
    r = summarize(np.array([[0.2, 0.4, 0.6, 0.8]]), 200, np.random.default_rng(0))
    assert r.mean == pytest.approx(0.5) and r.std == 0.0 and r.n_seeds == 1
    assert r.iqm_low == r.iqm_high == pytest.approx(r.iqm) == pytest.approx(0.5)
    assert r.mean_low == r.mean_high == pytest.approx(r.mean)
