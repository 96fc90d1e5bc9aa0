"""Deterministic evaluation: success per task, where success means success at any step.

Two ways, chosen by ``env.eval_ends_at_success``: every task's episodes in lock-step and at full
length (the reference's; :func:`evaluate` on a :class:`MultiTaskVecEnv`), or each task on its own
with episodes ending at success (Meta-World+'s; :class:`ptsl.core.eval_tasks.TaskEvaluator`).
:func:`evaluator` builds the one the protocol asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import faults
from .agent.sac import MultiTaskSAC
from .config import EnvConfig
from .envs import MultiTaskVecEnv, TaskSet, eval_env
from .eval_tasks import TaskEvaluator


@dataclass(frozen=True)
class EvalResult:
    """Per-task success rate and mean episode return (raw, un-normalised reward)."""

    success: np.ndarray  # (num_tasks,) mean over episodes of any-step success
    returns: np.ndarray  # (num_tasks,) mean over episodes of the summed raw reward

    @property
    def mean_success(self) -> float:
        """The paper's metric: mean over tasks."""
        return float(self.success.mean())

    @property
    def mean_return(self) -> float:
        return float(self.returns.mean())


def evaluator(tasks: TaskSet, env_cfg: EnvConfig, seed: int,
              workers: int = 1) -> MultiTaskVecEnv | TaskEvaluator:
    """What evaluation steps under ``env_cfg``: the lock-step environment of
    :func:`ptsl.core.envs.eval_env`, or with ``eval_ends_at_success`` a :class:`TaskEvaluator`
    over ``workers`` processes (the machine's choice: the numbers are the same)."""
    if env_cfg.eval_ends_at_success:
        return TaskEvaluator(tasks, env_cfg, seed, workers)
    return eval_env(tasks, env_cfg, seed)


def evaluate(agent: MultiTaskSAC, env: MultiTaskVecEnv | TaskEvaluator,
             episodes: int = 1) -> EvalResult:
    """Run ``episodes`` episodes of every task with the deterministic policy ``tanh(mean)``:
    full episodes in lock-step on a :class:`MultiTaskVecEnv`, each task on its own to success on
    a :class:`TaskEvaluator`.

    With fixed goals and a deterministic policy every episode of a task is the same. Where
    training resamples goals, episode ``k`` runs on each task's ``k``-th goal (Meta-World+:
    one episode per goal, 50 per task), so an evaluation draws nothing at random and is the
    same wherever a run resumed.
    """
    if isinstance(env, TaskEvaluator):
        success, returns = env.evaluate(
            lambda obs, ids: agent.act(obs, ids, deterministic=True), episodes)
        return EvalResult(success=success, returns=returns)
    success = np.zeros((episodes, env.num_tasks), dtype=np.float64)
    returns = np.zeros((episodes, env.num_tasks), dtype=np.float64)
    for ep in range(episodes):
        obs = env.reset(goal=ep) if env.resamples_goals else env.reset()
        for _ in range(env.episode_length):
            step = env.step(agent.act(obs, env.task_ids, deterministic=True))
            success[ep] = np.maximum(success[ep], step.success > 0)
            returns[ep] += step.raw_reward
            obs = step.obs
            faults.point("eval")
    return EvalResult(success=success.mean(0), returns=returns.mean(0))
