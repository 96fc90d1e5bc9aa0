"""Report figures render valid PNGs, for one seed and for 50 tasks, and paired contrasts."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ptsl.report.figures import (ContrastRow, plot_contrasts, plot_curves, plot_task_heatmap,
                                 seed_mean_band, short_task_name)


def _curves(experiments: int, seeds: int, steps: int = 6, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [{"experiment": f"exp{e}", "seed": s, "step": 100 * (k + 1), "env_steps": 1000 * k,
             "success": float(np.clip(k / steps + rng.normal(0, 0.1), 0, 1)), "return": 0.0}
            for e in range(experiments) for s in range(1, seeds + 1) for k in range(steps)]
    return pd.DataFrame(rows)


def _write(path: Path, png: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # IHDR width, height


def _only(tmp_path: Path, path: Path) -> None:
    """The PNG is the only file there."""
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [path.name]


@pytest.mark.parametrize("experiments,seeds", [(2, 3), (10, 1)])
def test_plot_curves_writes_a_png(tmp_path, experiments, seeds):
    path = tmp_path / "figs" / "curves.png"
    _write(path, plot_curves(_curves(experiments, seeds), [f"exp{e}" for e in range(experiments)],
                             "success", reps=200, rng=np.random.default_rng(0), mark_step=500,
                             labels={"exp0": "MT-SAC"}))
    _png_size(path)
    _only(tmp_path, path)


def test_plot_curves_is_reproducible_and_checks_inputs():
    c = _curves(2, 3)
    a = plot_curves(c, ["exp0", "exp1"], "t", 100, np.random.default_rng(3), labels=["x", "y"])
    b = plot_curves(c, ["exp0", "exp1"], "t", 100, np.random.default_rng(3), labels=["x", "y"])
    assert a == b
    with pytest.raises(ValueError, match="nope"):
        plot_curves(c, ["exp0", "nope"], "t", 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="labels"):
        plot_curves(c, ["exp0"], "t", 10, np.random.default_rng(0), labels=["x", "y"])


def test_plot_curves_of_training_success_skips_empty_windows(tmp_path):
    """Training success is empty where no episode finished: those rows are left out, and an
    experiment without any value is named in the legend instead of failing the figure."""
    c = _curves(2, 2)
    c["train_success"] = c["success"]
    c.loc[c["step"] == 100, "train_success"] = float("nan")
    c.loc[c["experiment"] == "exp1", "train_success"] = float("nan")
    path = tmp_path / "train.png"
    _write(path, plot_curves(c, ["exp0", "exp1"], "t", 50, np.random.default_rng(0),
                             column="train_success", ylabel="training success rate"))
    _png_size(path)
    # The same data without the empty rows draws the same line for exp0.
    full = plot_curves(c, ["exp0"], "t", 50, np.random.default_rng(1), column="train_success")
    kept = plot_curves(c[c["train_success"].notna()], ["exp0"], "t", 50,
                       np.random.default_rng(1), column="train_success")
    assert full == kept


def test_seed_band():
    rng = np.random.default_rng(0)
    assert seed_mean_band(np.array([0.4]), 100, rng) == (0.4, 0.4, 0.4)
    mean, low, high = seed_mean_band(np.array([0.0, 0.5, 1.0, np.nan]), 500, rng)
    assert mean == pytest.approx(0.5) and 0.0 <= low < mean < high <= 1.0


def test_heatmap_writes_a_png_and_widens_for_mt50(tmp_path):
    rng = np.random.default_rng(0)
    small, large = tmp_path / "mt10.png", tmp_path / "sub" / "mt50.png"
    _write(small, plot_task_heatmap(rng.uniform(size=(3, 10)), ["a", "b", "c"],
                                    [f"task-{i}-v3" for i in range(10)], "MT10"))
    m = rng.uniform(size=(4, 50))
    m[0, 0] = np.nan  # a task without a value is drawn grey, not an error
    _write(large, plot_task_heatmap(m, ["w", "x", "y", "z"],
                                    [f"pick-place-wall-{i}-v3" for i in range(50)], "MT50"))
    (w_small, _), (w_large, _) = _png_size(small), _png_size(large)
    assert w_large > 1.5 * w_small and w_large / 50 >= 30  # >= 30 px per task column
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["mt10.png", "mt50.png"]


def test_heatmap_single_row_and_shape_check(tmp_path):
    path = tmp_path / "one.png"
    _write(path, plot_task_heatmap(np.array([[0.0, 1.0]]), ["only"], ["reach-v3", "push-v3"],
                                   "t"))
    _png_size(path)
    _only(tmp_path, path)
    with pytest.raises(ValueError, match="does not match"):
        plot_task_heatmap(np.zeros((2, 3)), ["a"], ["x", "y", "z"], "t")


def test_short_task_name():
    assert short_task_name("pick-place-v3") == "pick-place"
    assert short_task_name("success/door-open-v2") == "door-open"
    assert short_task_name("reach") == "reach"


def test_contact_sheet_wraps_long_rows(tmp_path):
    from ptsl.report.figures import plot_contact_sheet

    rng = np.random.default_rng(0)
    frame = lambda: rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)  # noqa: E731
    rows = [("MT-SAC (a-1)", [(f"task{i}-v3", frame(), i == 0) for i in range(12)]),
            ("CARE (b-1)", [(f"task{i}-v3", frame(), False) for i in range(3)])]
    path = tmp_path / "sheet.png"
    _write(path, plot_contact_sheet(rows, "Tiny: rollouts", columns=5))
    width, height = _png_size(path)
    assert width == 5 * 110  # five tiles of 1.1 in at 100 dpi
    wide = tmp_path / "wide.png"
    _write(wide, plot_contact_sheet(rows, "Tiny: rollouts", columns=12))
    assert _png_size(wide)[1] < height  # one line of tiles for the first row instead of three
    _only_files = sorted(p.name for p in tmp_path.iterdir())
    assert _only_files == ["sheet.png", "wide.png"]
    with pytest.raises(ValueError, match="at least one frame"):
        plot_contact_sheet([("empty", [])], "t")


def test_plot_curves_draws_published_points_of_plotted_rows_only():
    rng = np.random.default_rng(0)
    curves = pd.DataFrame({"experiment": ["a"] * 4, "seed": [1, 1, 2, 2],
                           "step": [0, 10, 0, 10], "success": [0.0, 0.5, 0.1, 0.4]})
    assert plot_curves(curves, ["a"], "t", 20, rng, points=[("a", 10, 0.3)])
    with pytest.raises(ValueError, match=r"published points for experiments \['b'\]"):
        plot_curves(curves, ["a"], "t", 20, rng, points=[("b", 10, 0.3)])


def test_paired_contrasts_draw_a_line_each_reproducibly(tmp_path):
    rows = [ContrastRow("A − B", [0.1, -0.05, 0.02], (-0.12, 0.16), 0.09, True),
            ContrastRow("C − B", [0.0, 0.04], (-0.2, 0.24)),
            ContrastRow("D − B", [0.03], (float("nan"), float("nan")))]  # one pair: no interval
    one, three = tmp_path / "a" / "one.png", tmp_path / "b" / "three.png"
    _write(one, plot_contrasts(rows[:1], "T", "difference"))
    _write(three, plot_contrasts(rows, "T", "difference"))
    (w1, h1), (w3, h3) = _png_size(one), _png_size(three)
    assert w1 == w3 and h3 > h1  # a line per contrast
    _only(tmp_path / "b", three)
    assert plot_contrasts(rows, "T", "difference") == three.read_bytes()
    unpublished = plot_contrasts([rows[0]._replace(published=None)] + rows[1:], "T", "difference")
    assert unpublished != three.read_bytes()  # the published cross is drawn


def test_paired_contrasts_refuse_nothing_to_draw_and_draw_a_contrast_without_pairs(tmp_path):
    with pytest.raises(ValueError, match="no contrasts to plot"):
        plot_contrasts([], "T", "d")
    # No seed with both runs' values (no training episode by the step): said on its line.
    nan = (float("nan"), float("nan"))
    _write(tmp_path / "x.png", plot_contrasts(
        [ContrastRow("A − B", [], nan), ContrastRow("C − B", [0.1, 0.2], (0.0, 0.3))], "T", "d"))
    _write(tmp_path / "y.png", plot_contrasts([ContrastRow("A − B", [], nan)], "T", "d"))
    assert _png_size(tmp_path / "x.png")[1] > _png_size(tmp_path / "y.png")[1]
