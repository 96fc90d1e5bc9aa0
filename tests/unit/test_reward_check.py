"""The reward check (``python -m ptsl.tools.reward_check``) on real Meta-World, one goal per
task: reach's scripted policy succeeds and out-earns a random one under both reward versions;
peg-insert-side's scripted trajectories succeed under v2's success test and not under v1's; the
record is the same on a second run; bad flags get one line and write nothing."""

from __future__ import annotations

import pandas as pd
import pytest

from ptsl.tools.reward_check import check, main


@pytest.fixture(scope="module")
def reach() -> pd.DataFrame:
    return check(seed=1, episodes=1, tasks=["reach-v3"])


def test_reach_scripted_succeeds_and_beats_random_under_both_versions(reach):
    assert list(reach["reward_version"]) == ["v1", "v2"]
    assert set(reach["policy"]) == {"scripted"}
    for _, row in reach.iterrows():
        assert row["success"] == 1.0
        assert row["first_success"] < 150
        assert row["reward"] > row["reward_random"]
        assert row["return_gain"] > 0
        assert row["rises_to_success"] == 1.0
    # The scripted policy reads the state only: both versions step through the same states.
    assert reach["same_trajectory"].all()


def test_the_record_is_deterministic(reach):
    pd.testing.assert_frame_equal(check(seed=1, episodes=1, tasks=["reach-v3"]), reach)


def test_peg_insert_side_success_depends_on_the_reward_version():
    """The finding the check records: the v1 branch tests the peg's grasp point against a point
    inside the hole, which the scripted insertion never brings within 7 cm; v2 tests its head."""
    frame = check(seed=1, episodes=1, tasks=["peg-insert-side-v3"])
    scripted = frame[frame["policy"] == "scripted"].set_index("reward_version")
    assert scripted["same_trajectory"].all()
    assert scripted.loc["v2", "success"] == 1.0
    assert scripted.loc["v1", "success"] == 0.0
    assert scripted.loc["v1", "reward"] > scripted.loc["v1", "reward_random"]


def test_main_writes_the_table_and_a_verdict(tmp_path, capsys):
    out = tmp_path / "check"
    assert main(["--episodes", "1", "--task", "reach-v3", "--out", str(out)]) == 0
    csv = pd.read_csv(out / "reward_check.csv")
    assert list(csv["task"]) == ["reach-v3", "reach-v3"]
    text = (out / "reward_check.md").read_text()
    assert "--episodes 1 --seed 1 --task reach-v3" in text
    assert "- **reach-v3**: scripted: healthy" in text
    assert "| reach-v3 | scripted | v1 | 1/1 |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, flag", [
    (["--episodes", "0"], "--episodes"),
    (["--episodes", "many"], "--episodes"),
    (["--seed", "-1"], "--seed"),
    (["--task", "reach-v2"], "--task"),
    (["--colour", "red"], "--colour"),
])
def test_bad_flags_get_one_line_and_write_nothing(argv, flag, tmp_path, capsys):
    out = tmp_path / "check"
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ") and flag in err and "allowed" in err
    assert not out.exists()


def test_out_naming_a_file_is_refused(tmp_path, capsys):
    path = tmp_path / "a-file"
    path.write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err
    assert path.read_text() == "x"
