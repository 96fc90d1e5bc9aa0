"""Deterministic evaluation: success per task, where success means success at any step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import faults
from .agent import MultiTaskSAC
from .envs import MultiTaskVecEnv


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


def evaluate(agent: MultiTaskSAC, env: MultiTaskVecEnv, episodes: int = 1) -> EvalResult:
    """Run ``episodes`` full episodes of every task with the deterministic policy ``tanh(mean)``.

    With fixed goals and a deterministic policy every episode of a task is the same. Where
    training resamples goals, episode ``k`` runs on each task's ``k``-th goal (Meta-World+:
    one episode per goal, 50 per task), so an evaluation draws nothing at random and is the
    same wherever a run resumed.
    """
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
