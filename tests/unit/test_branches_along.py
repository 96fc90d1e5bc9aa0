"""The task branches along training (ptsl.tools.branches_along): a resume checkpoint written by
the project's own writer is measured exactly as the finished-run measurement measures its agent,
its start (step 0) is the agent training started from, a run without PTSL layers is passed
over, a (run, step) is measured once, and a broken table is
refused in one line."""

from __future__ import annotations

import pandas as pd
import pytest

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.benchmarks import ACTION_DIM, OBS_DIM
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.envs import load_tasks
from ptsl.core.errors import CorruptFileError
from ptsl.core.persistence import ResumeCheckpoints
from ptsl.core.branch_records import NORM_COLUMNS as COLUMNS
from ptsl.core.branches import measure_run
from ptsl.tools.branches_along import CSV_NAME, FIGURE_NAME, checkpoints, measure_new, read_rows

from ..helpers import random_batch


def _run(method: str, task_cache):
    exp = ExperimentConfig(benchmark="mt10", method=method, hidden_dim=16, num_layers=2,
                           **({"pal_dim": 4} if method == "care_ptsl" else {}))
    cfg = RunConfig(name=f"tiny_{method}", seed=1, experiment=exp,
                    env=EnvConfig(episode_length=10), sac=SACConfig(batch_size=40),
                    train=TrainConfig(steps=600, eval_every=300, checkpoint_every=300))
    names = load_tasks("mt10", 1, task_cache).names
    agent = build_agent(cfg, Shapes(OBS_DIM, ACTION_DIM, len(names)), names)
    return agent, cfg


def _learn(agent, seed: int) -> None:
    for k in range(2):
        agent.update(random_batch(n=40, seed=seed + k, obs_dim=OBS_DIM, num_tasks=10))


def _save(resume, agent, cfg, step: int) -> None:
    ResumeCheckpoints(resume, cfg).save(step, {"agent": agent.training_state(), "buffer": {}})


def test_checkpoints_are_measured_once_each_as_a_finished_run_is(tmp_path, task_cache):
    resume, out = tmp_path / "resume", tmp_path / "along"
    agent, cfg = _run("care_ptsl", task_cache)
    _learn(agent, 0)
    _save(resume, agent, cfg, 300)
    plain, plain_cfg = _run("mtsac", task_cache)  # no PTSL layer: nothing to measure
    _save(resume, plain, plain_cfg, 300)
    (resume / "tiny_care_ptsl-1-0123456789abcdef-000000150.pt").write_bytes(b"no checksum")
    assert [(e, s, st) for e, s, st, _ in checkpoints(resume)] == [("tiny_care_ptsl", 1, 300),
                                                                  ("tiny_mtsac", 1, 300)]
    want_300 = measure_run(agent, cfg, task_cache)
    fresh, _ = _run("care_ptsl", task_cache)  # the agent training started from
    want_0 = measure_run(fresh, cfg, task_cache)

    lines: list[str] = []
    plain: set[str] = set()
    assert measure_new(resume, out, task_cache, lines.append, plain) == 2
    assert lines == ["measured tiny_care_ptsl-1 at step 300 and at its start"]
    assert plain == {"tiny_mtsac"}
    got = pd.read_csv(out / CSV_NAME)
    assert list(got.columns) == ["step", *COLUMNS]
    assert sorted(set(got["step"])) == [0, 300] and set(got["run"]) == {"tiny_care_ptsl-1"}
    for step, want in ((0, want_0), (300, want_300)):
        rows = got[got["step"] == step].drop(columns="step").reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, want, check_dtype=False)
    assert (got.loc[got["step"] == 0, "task_weight_change"] == 0).all()
    assert (out / FIGURE_NAME).stat().st_size > 0

    # A second pass measures nothing and leaves the table as it was.
    before = (out / CSV_NAME).read_bytes()
    assert measure_new(resume, out, task_cache, lines.append, plain) == 0
    assert (out / CSV_NAME).read_bytes() == before

    # The run goes on: its next checkpoint (the older one deleted by the writer) adds its rows.
    _learn(agent, 10)
    _save(resume, agent, cfg, 600)
    assert measure_new(resume, out, task_cache, lines.append, plain) == 1
    assert lines[-1] == "measured tiny_care_ptsl-1 at step 600"
    got = pd.read_csv(out / CSV_NAME)
    assert sorted(set(got["step"])) == [0, 300, 600]
    later = got[got["step"] == 600].drop(columns="step").reset_index(drop=True)
    pd.testing.assert_frame_equal(later, measure_run(agent, cfg, task_cache), check_dtype=False)
    # Training moved the task weights: the two steps' measurements differ.
    assert not got.loc[got["step"] == 300, "task_weight_change"].reset_index(drop=True).equals(
        got.loc[got["step"] == 600, "task_weight_change"].reset_index(drop=True))


def test_a_broken_table_is_refused_naming_it(tmp_path):
    csv = tmp_path / CSV_NAME
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(CorruptFileError, match=f"{CSV_NAME}: branches-along table is "
                                               r"unreadable \(no columns step and run\)"):
        read_rows(csv)
    assert read_rows(tmp_path / "none.csv") is None


def test_a_checkpoint_name_read_back_as_resume_checkpoints_writes_it(tmp_path):
    """The parser in core reads the names ResumeCheckpoints writes (a dashed experiment name
    too), and nothing else."""
    from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
    from ptsl.core.persistence import ResumeCheckpoints, parse_checkpoint_name

    cfg = RunConfig(name="mt10-care_ptsl_w104", seed=7,
                    experiment=ExperimentConfig(benchmark="mt10", method="care", hidden_dim=16,
                                                num_layers=2),
                    env=EnvConfig(), sac=SACConfig(),
                    train=TrainConfig(steps=10, eval_every=10, checkpoint_every=10))
    ResumeCheckpoints(tmp_path, cfg).save(30_600, {"x": 1})
    (path,) = tmp_path.glob("*.pt")
    name = parse_checkpoint_name(path.name)
    assert (name.experiment, name.seed, name.config_key, name.step) == \
        ("mt10-care_ptsl_w104", 7, cfg.key(), 30_600)
    assert parse_checkpoint_name(path.name + ".sha256") is None
    assert parse_checkpoint_name("mt10_care-1-notakey-000000001.pt") is None
