"""The training loop on real Meta-World at a tiny budget: curve, outputs, resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.loop import train, write_outputs


def _cfg(steps=60) -> RunConfig:
    return RunConfig(
        name="tiny", seed=1,
        experiment=ExperimentConfig(benchmark="reach-v3", method="mtsac", hidden_dim=32,
                                    num_layers=2),
        env=EnvConfig(episode_length=20),
        sac=SACConfig(batch_size=32, init_steps=20),
        train=TrainConfig(steps=steps, eval_every=20, checkpoint_every=20))


@pytest.fixture(scope="module")
def uninterrupted(task_cache):
    """The tiny run trained from start to end, once for the tests that read or compare with it
    (a CPU run gives the same bytes every time: test_a_cpu_run_gives_the_same_bytes_twice)."""
    return train(_cfg(), task_cache=task_cache, progress=False)


@pytest.fixture(scope="module")
def interrupted_once(tmp_path_factory, task_cache):
    """The scratch folder of the tiny run interrupted after its step-40 checkpoint, made once."""
    _, scratch, _ = _interrupted(tmp_path_factory.mktemp("interrupted"), task_cache)
    return scratch


@pytest.fixture
def interrupted(interrupted_once, tmp_path):
    """This test's own copy of that interrupted run: its config, scratch folder and checkpoint
    (the test may rewrite the checkpoint, and resuming removes it)."""
    scratch = Path(shutil.copytree(interrupted_once, tmp_path / "scratch"))
    (path,) = [p for p in scratch.iterdir() if p.suffix == ".pt"]
    return _cfg(), scratch, path


def test_train_writes_curve_and_outputs(tmp_path, uninterrupted):
    result = uninterrupted
    assert result.curve["step"].tolist() == [0, 20, 40, 60]
    assert result.curve["success"].between(0, 1).all()
    assert "success/reach-v3" in result.curve.columns
    out = tmp_path / "run"
    write_outputs(_cfg(), result, out)
    assert sorted(p.name for p in out.iterdir()) == ["curve.csv", "model.pt", "model.pt.sha256",
                                                         "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_step"] == 60 and summary["parameter_count"] == result.parameter_count
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_resume_after_interruption(interrupted, task_cache):
    cfg, scratch, _ = interrupted
    saved = sorted(p.name for p in scratch.iterdir())
    assert saved == [f"tiny-1-{cfg.key()}-000000040.pt", f"tiny-1-{cfg.key()}-000000040.pt.sha256"]
    result = train(cfg, scratch_dir=scratch, task_cache=task_cache, progress=False)
    assert result.resumed_from == 40  # the checkpoint written just before the interruption
    assert result.curve["step"].tolist() == [0, 20, 40, 60]
    assert not list(scratch.iterdir())  # a finished run removes its scratch checkpoint


def test_scratch_key_changes_with_seed_and_config():
    a, b = _cfg(), _cfg(steps=80)
    assert a.key() != b.key()
    assert a.key() != a.model_copy(update={"seed": 2}).key()


def test_a_cpu_run_gives_the_same_bytes_twice(task_cache):
    """The whole loop (environments stepping while the update runs, losses checked once per
    episode) is deterministic: two runs of CARE+PTSL give the same curve and weights."""
    from ptsl.core.runtime import Runtime

    cfg = RunConfig(
        name="tiny", seed=2,
        experiment=ExperimentConfig(benchmark="reach-v3", method="care_ptsl", hidden_dim=32,
                                    num_layers=2, pal_dim=8),
        env=EnvConfig(episode_length=20), sac=SACConfig(batch_size=32, init_steps=20),
        train=TrainConfig(steps=60, eval_every=20, checkpoint_every=20))
    a, b = (train(cfg, task_cache=task_cache, progress=False,
                  runtime=Runtime(device="cpu", vector="sync")) for _ in range(2))
    assert a.curve.to_csv() == b.curve.to_csv()
    wa, wb = a.agent.state_dict(), b.agent.state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    fresh = build_agent(cfg, Shapes(39, 4, 1), ("reach-v3",)).state_dict()
    assert any(not torch.equal(fresh[k], wa[k]) for k in wa)  # the updates moved the weights


def _interrupted(tmp_path, task_cache, cfg: RunConfig | None = None, at: int = 40
                       ) -> tuple[RunConfig, object, object]:
    """A run (``cfg``, default the tiny one) interrupted after its step-``at`` checkpoint: its
    config, scratch folder and checkpoint file."""
    cfg = cfg or _cfg()
    scratch = tmp_path / "scratch"

    def interrupt(row):
        if row["step"] == at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, scratch_dir=scratch, task_cache=task_cache, progress=False, on_eval=interrupt)
    (path,) = [p for p in scratch.iterdir() if p.suffix == ".pt"]
    return cfg, scratch, path


def _rewrite(path, change) -> None:
    """Rewrite a resume checkpoint in place (a valid file: format, version and checksum)."""
    from ptsl.core import persistence

    state = persistence.load(path, "resume checkpoint")
    change(state)
    persistence.save(path, {k: v for k, v in state.items()
                            if k not in ("format", "ptsl_version")}, "resume checkpoint")


def _as_made_on_a_gpu(state: dict, record_device: bool) -> None:
    """What a CUDA run's checkpoint holds: a CUDA generator's 16-byte state, capturable Adam
    with its step counters as float tensors, and (since they record it) the device."""
    state["agent"]["generator"] = torch.zeros(16, dtype=torch.uint8)
    for opt in state["agent"]["optimizers"].values():
        for group in opt["param_groups"]:
            group["capturable"] = True
    state["update_path"] = "captured"
    if record_device:
        state["device"] = "cuda"
    else:
        state.pop("device")


@pytest.mark.parametrize("recorded", [True, False])
def test_a_checkpoint_from_a_gpu_is_skipped_with_one_line(interrupted, uninterrupted, task_cache,
                                                          capsys, recorded):
    """A CPU run finds a GPU run's checkpoint (a shared scratch folder): it says so in one
    warning line and trains from the start, ending as an uninterrupted run; whether the
    checkpoint records its device or predates that (told by its generator state)."""
    cfg, scratch, path = interrupted
    _rewrite(path, lambda s: _as_made_on_a_gpu(s, recorded))
    capsys.readouterr()
    resumed = train(cfg, scratch_dir=scratch, task_cache=task_cache, progress=False)
    err = capsys.readouterr().err
    assert "not resuming from this checkpoint, it was made under another device: 'cuda' there, " \
           "'cpu' here" in err and err.count("warning:") == 1
    assert resumed.resumed_from == 0
    assert resumed.curve.to_csv() == uninterrupted.curve.to_csv()


def test_optimizers_take_their_options_from_the_agent_not_the_file(interrupted, uninterrupted,
                                                                   task_cache):
    """A CPU checkpoint whose Adam groups say capturable (as a GPU run's do) resumes on CPU:
    the agent's own options win, and the run ends as an uninterrupted one, bit for bit."""
    cfg, scratch, path = interrupted

    def capturable_flags(state: dict) -> None:
        for opt in state["agent"]["optimizers"].values():
            for group in opt["param_groups"]:
                group["capturable"] = True
    _rewrite(path, capturable_flags)
    resumed = train(cfg, scratch_dir=scratch, task_cache=task_cache, progress=False)
    assert resumed.resumed_from == 40
    for opt in resumed.agent.optimizers().values():
        assert all(g["capturable"] is False for g in opt.param_groups)
    assert resumed.curve.to_csv() == uninterrupted.curve.to_csv()
    want, got = uninterrupted.agent.state_dict(), resumed.agent.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)


def test_training_success_is_any_step_success_per_episode_in_windows():
    """Each task's success at any step of an episode, under whatever acted; the episodes
    finished since the last evaluation row give that row's rates; the state survives a
    checkpoint."""
    import numpy as np

    from ptsl.core.loop import TrainingSuccess

    ts = TrainingSuccess(3)
    assert ts.take_window() == (0, None)
    ts.step(np.array([0.0, 1.0, 0.0]))
    ts.step(np.array([0.0, 0.0, 1.0]))  # success at any step counts
    np.testing.assert_array_equal(ts.end_episode(), [0.0, 1.0, 1.0])
    ts.step(np.array([1.0, 0.0, 0.0]))
    np.testing.assert_array_equal(ts.end_episode(), [1.0, 0.0, 0.0])  # a new episode
    saved = ts.state()
    n, rates = ts.take_window()
    assert n == 2 and rates.tolist() == [0.5, 0.5, 0.5]
    assert ts.take_window() == (0, None)
    ts.load_state(saved)
    n, again = ts.take_window()
    assert n == 2 and again.tolist() == rates.tolist()


class _Episodes:
    """A RunLog that keeps the training episodes it is given (and nothing else)."""

    run_id = ""

    def __init__(self) -> None:
        self.episodes: list[tuple[int, dict]] = []

    def training_episode(self, step, success):
        self.episodes.append((step, dict(success)))

    def evaluation(self, step, row): ...
    def losses(self, step, means): ...
    def resumed(self, step, curve, previous_run): ...
    def flush(self): ...


def test_the_curve_carries_the_windowed_training_success_and_the_log_each_episode(task_cache):
    cfg = RunConfig(
        name="tiny", seed=1,
        experiment=ExperimentConfig(benchmark="mt10", method="mtsac", hidden_dim=32,
                                    num_layers=2),
        env=EnvConfig(episode_length=20), sac=SACConfig(batch_size=32, init_steps=20),
        train=TrainConfig(steps=100, eval_every=40, checkpoint_every=40))
    log = _Episodes()
    curve = train(cfg, task_cache=task_cache, progress=False, log=log).curve
    assert [s for s, _ in log.episodes] == [20, 40, 60, 80, 100]
    tasks = [c.removeprefix("success/") for c in curve.columns if c.startswith("success/")]
    assert all(list(success) == tasks for _, success in log.episodes)
    assert curve["train_episodes"].tolist() == [0, 2, 2, 1]
    assert curve.loc[0, ["train_success", *[f"train_success/{t}" for t in tasks]]].isna().all()
    for i, (lo, hi) in enumerate([(0, 2), (2, 4), (4, 5)], start=1):
        window = log.episodes[lo:hi]
        for task in tasks:
            want = sum(s[task] for _, s in window) / len(window)
            assert curve.loc[i, f"train_success/{task}"] == want
        assert curve.loc[i, "train_success"] == pytest.approx(
            sum(curve.loc[i, f"train_success/{t}"] for t in tasks) / len(tasks))


def test_a_resumed_run_with_resampled_goals_ends_as_an_uninterrupted_one(tmp_path, task_cache):
    """Meta-World+'s protocol (goals resampled every episode, v2 rewards, no normalisation,
    evaluation one episode per goal): a run killed after a checkpoint and resumed gives the
    bytes of an uninterrupted run, training-success window included."""
    cfg = RunConfig(
        name="tiny", seed=1,
        experiment=ExperimentConfig(benchmark="mt10", method="mtsac", hidden_dim=32,
                                    num_layers=2),
        env=EnvConfig(episode_length=20, goals="resample", reward_version="v2",
                      normalize_reward=False),
        sac=SACConfig(batch_size=32, init_steps=20),
        train=TrainConfig(steps=100, eval_every=40, checkpoint_every=40, eval_episodes=3))
    cfg, scratch, _ = _interrupted(tmp_path, task_cache, cfg, at=80)
    resumed = train(cfg, scratch_dir=scratch, task_cache=task_cache, progress=False)
    assert resumed.resumed_from == 80
    whole = train(cfg, task_cache=task_cache, progress=False)
    assert resumed.curve.to_csv() == whole.curve.to_csv()
    want, got = whole.agent.state_dict(), resumed.agent.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)


def test_a_run_with_the_v1_observation_trains_saves_and_loads(tmp_path, task_cache):
    """The option reaches the networks (12 inputs), the saved config and the loaded agent."""
    from ptsl.core.persistence import load_agent

    base = _cfg(steps=40)
    cfg = base.model_copy(update={"env": base.env.model_copy(update={"observation": "v1"})})
    result = train(cfg, task_cache=task_cache, progress=False)
    write_outputs(cfg, result, tmp_path / "run")
    agent = load_agent(tmp_path / "run" / "model.pt", expect=cfg)
    first = next(p for p in agent.actor.parameters() if p.dim() == 2)
    assert first.shape[1] == 12
    with pytest.raises(Exception, match="observation"):
        load_agent(tmp_path / "run" / "model.pt", expect=base)  # a full-observation config
