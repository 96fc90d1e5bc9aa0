"""The grid's progress lines: the counts, and where each running stage's progress bar is, read
from the bar tqdm itself writes (the training loop's format: unit "step", a run's name)."""

from __future__ import annotations

from tqdm import tqdm

from ptsl.ops.progress import Progress, bar_state


def _log(tmp_path, *states: str, name: str = "train@mt10_care-4.log"):
    """A stage log as the grid writes it: DVC's lines, then the bar redrawn with carriage
    returns."""
    log = tmp_path / name
    log.write_text("Running stage 'train@mt10_care-4':\n> python ../../pipeline/train.py\n"
                   + "\r".join(states))
    return log


def test_bar_state_reads_the_last_state_of_the_bar(tmp_path):
    states = [tqdm.format_meter(n, 100_000, n / 15.79, prefix="mt10_care-4", unit="step",
                                rate=15.79, postfix="success=0.20") for n in (34_785, 34_820)]
    assert bar_state(_log(tmp_path, *states)) == (
        "34,820 of 100,000 steps (35%), 15.8 steps/s, 1:08:47 left")


def test_bar_state_below_one_step_a_second_and_at_the_start(tmp_path):
    slow = tqdm.format_meter(3, 100_000, 6.0, prefix="mt10_care-4", unit="step", rate=0.5)
    assert "s/step" in slow  # tqdm's other form, which the phrase turns back into steps/s
    assert bar_state(_log(tmp_path, slow)) == "3 of 100,000 steps (0%), 0.5 steps/s, 55:33:14 left"
    start = tqdm.format_meter(0, 100_000, 0.0, prefix="mt10_care-4", unit="step")
    assert bar_state(_log(tmp_path, start)) == (
        "0 of 100,000 steps (0%), rate not known yet, time left not known yet")


def test_bar_state_of_a_real_bar_written_to_the_log(tmp_path):
    """tqdm writing to the file as the loop's bar does (a resumed run starts at ``initial``)."""
    log = tmp_path / "train@x-1.log"
    with open(log, "w") as f:
        bar = tqdm(total=500, initial=200, unit="step", desc="x-1", mininterval=0, file=f)
        for _ in range(50):
            bar.update(1)
        bar.close()
    assert bar_state(log).startswith("250 of 500 steps (50%), ")


def test_bar_state_without_a_bar_or_a_log(tmp_path):
    assert bar_state(_log(tmp_path)) is None  # started, no bar drawn yet
    assert bar_state(tmp_path / "on-another-node.log") is None


def test_progress_says_where_running_stages_are_when_due(tmp_path, capsys):
    now = [0.0]
    bar = tqdm.format_meter(5_100, 100_000, 340.0, prefix="mt10_care-4", unit="step", rate=15.0)
    logs = {"train@mt10_care-4": _log(tmp_path, bar),
            "train@mt10_care-5": tmp_path / "not-yet.log"}
    p = Progress(3, logs, every=600.0, clock=lambda: now[0])
    p.running = {"train@mt10_care-4", "train@mt10_care-5"}
    p.show()
    now[0] = 599.0
    p.show()
    assert capsys.readouterr().out == "grid: 0 done, 2 running, 0 failed, 1 left of 3\n"
    now[0] = 600.0
    p.show()
    assert capsys.readouterr().out.splitlines() == [
        "grid: train@mt10_care-4 at 5,100 of 100,000 steps (5%), 15.0 steps/s, 1:45:26 left",
        f"grid: train@mt10_care-5 running, no progress bar in its log here yet "
        f"({tmp_path / 'not-yet.log'})"]
    now[0] = 1000.0
    p.show()  # not due again until 1,200 s, and the counts did not change
    assert capsys.readouterr().out == ""
