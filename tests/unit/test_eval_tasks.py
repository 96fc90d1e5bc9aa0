"""Evaluation as Meta-World+ runs it (``env.eval_ends_at_success``) on real Meta-World: an
episode ends at its first success, the numbers do not depend on how many processes evaluate,
and the Meta-World+ training settings (evaluation stride, sizes per task) reach the loop."""

from __future__ import annotations

import numpy as np

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.envs import MultiTaskVecEnv, load_tasks
from ptsl.core.eval_tasks import TaskEvaluator
from ptsl.core.evaluation import evaluate, evaluator
from ptsl.core.log import NoLog
from ptsl.core.loop import Training
from ptsl.core.persistence import ResumeCheckpoints
from ptsl.core.runtime import Runtime

PLUS = EnvConfig(episode_length=60, goals="resample", reward_version="v2",
                 normalize_reward=False, eval_ends_at_success=True)


class Scripted:
    """Meta-World's scripted policy of each task (they succeed), as an evaluation's ``act``."""

    def __init__(self, names: tuple[str, ...]) -> None:
        from metaworld.policies import ENV_POLICY_MAP

        self.policies = [ENV_POLICY_MAP[name]() for name in names]

    def __call__(self, obs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        return np.stack([self.policies[i].get_action(o) for o, i in zip(obs, ids)])


def test_an_episode_ends_at_its_first_success(task_cache):
    """Policies that succeed: with ``eval_ends_at_success`` each episode stops at its first
    success (a shorter return), without it runs its full length; the success rate is the same
    either way, and a task that has finished stops stepping."""
    tasks = load_tasks("mt10", 1, task_cache)
    out = {}
    for ends in (True, False):
        env_cfg = PLUS.model_copy(update={"episode_length": 150, "eval_ends_at_success": ends})
        ev = TaskEvaluator(tasks, env_cfg, 1)
        try:
            out[ends] = (*ev.evaluate(Scripted(tasks.names), episodes=2), ev.envs.steps)
        finally:
            ev.close()
    (success, ret, steps), (full_success, full_ret, full_steps) = out[True], out[False]
    assert np.array_equal(success, full_success) and success.mean() > 0.5
    assert full_steps == 2 * 150 * 10 and steps < full_steps / 2
    finished = success == 1.0
    assert (ret[finished] < full_ret[finished]).all()


def test_the_protocol_picks_the_evaluation(task_cache):
    tasks = load_tasks("mt10", 1, task_cache)
    lock_step = evaluator(tasks, PLUS.model_copy(update={"eval_ends_at_success": False}), 1)
    each = evaluator(tasks, PLUS, 1, workers=4)
    try:
        assert isinstance(lock_step, MultiTaskVecEnv)
        assert isinstance(each, TaskEvaluator) and each.workers == 4
        assert evaluator(tasks, PLUS, 1, workers=99).workers == 10  # at most one per task
    finally:
        lock_step.close()
        each.close()


def test_the_numbers_do_not_depend_on_the_worker_count(task_cache):
    """Each task acts on its own row, on one thread, so the tasks' split over processes changes
    no bit; a second evaluation reuses the workers' environments and gives the same again."""
    tasks = load_tasks("mt10", 1, task_cache)
    exp = ExperimentConfig(benchmark="mt10", method="paco", hidden_dim=32, num_layers=2)
    cfg = RunConfig(name="t", seed=1, experiment=exp, env=PLUS, sac=SACConfig(),
                    train=TrainConfig(steps=10, eval_every=5, checkpoint_every=5))
    agent = build_agent(cfg, Shapes(39, 4, 10), tasks.names)
    runs = []
    for workers, times in ((1, 1), (3, 2)):
        ev = evaluator(tasks, PLUS.model_copy(update={"episode_length": 15}), 1, workers)
        try:
            runs += [evaluate(agent, ev, episodes=2) for _ in range(times)]
        finally:
            ev.close()
    for res in runs[1:]:
        assert np.array_equal(res.success, runs[0].success)
        assert np.array_equal(res.returns, runs[0].returns)
    assert runs[0].returns.shape == (10,) and (runs[0].returns != 0).any()


def test_the_loop_evaluates_at_the_stride_and_sizes_count_per_task(task_cache):
    """Meta-World+'s settings as params: evaluations every ``eval_every * eval_stride`` steps
    (and at the end), the batch and the buffer per task; under the defaults, the totals."""
    exp = ExperimentConfig(benchmark="mt10", method="mtsac", hidden_dim=16, num_layers=2)
    cfg = RunConfig(name="t", seed=1, experiment=exp,
                    env=PLUS.model_copy(update={"episode_length": 10}),
                    sac=SACConfig(batch_size=4, buffer_capacity=50, init_steps=10,
                                  sizes_per_task=True),
                    train=TrainConfig(steps=30, eval_every=5, eval_stride=2, checkpoint_every=30))
    runtime = Runtime(vector="sync")
    training = Training(cfg, runtime, task_cache, ResumeCheckpoints(None, cfg), NoLog())
    assert training.buffer.capacity == 500 and training.sizes.batch_size == 40
    training.run(progress=False, on_eval=None, on_step=None)
    assert [row["step"] for row in training.curve] == [0, 10, 20, 30]
    assert SACConfig(batch_size=4).totals(10).batch_size == 4  # totals unless per task
