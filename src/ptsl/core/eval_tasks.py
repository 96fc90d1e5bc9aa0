"""Evaluation as Meta-World+ runs it (``env.eval_ends_at_success``): an episode ends at its first
success, and each task runs its episodes on its own, so tasks go side by side in worker
processes where the machine has cores.

Metaworld's ``evaluation.py`` switches ``terminate_on_success`` on for evaluation and steps every
task's environment until each has finished its episodes; this module does the same per task.
Success is the same as with full-length episodes (success at any step ends the episode there);
returns are summed up to the end of the episode, so they are shorter.

A task's numbers do not depend on which process ran it or on how many there are: the policy
acts on that task's one row at a time, on the CPU, on one thread, from a copy of the actor taken
at the start of the evaluation. The in-process path (one worker) runs the same function.
"""

from __future__ import annotations

import copy
import io
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import faults
from .agent import MultiTaskSAC, one_cpu_thread
from .config import EnvConfig
from .envs import MetaWorldTaskEnv, TaskSet, task_seed
from .nets.task_index import TaskIndex


@dataclass
class Policy:
    """The deterministic policy ``tanh(mean)`` of an agent: a CPU copy of its actor and task
    encoder, picklable for a worker process."""

    actor: nn.Module
    task_encoder: nn.Module | None
    num_tasks: int

    @classmethod
    def of(cls, agent: MultiTaskSAC) -> "Policy":
        actor = copy.deepcopy(agent.actor).to("cpu")
        encoder = None if agent.task_encoder is None else copy.deepcopy(agent.task_encoder).cpu()
        return cls(actor, encoder, agent.num_tasks)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, task: int) -> np.ndarray:
        """The action for one observation of task index ``task``."""
        task_i = TaskIndex(torch.tensor([task]), self.num_tasks)
        enc = None if self.task_encoder is None else self.task_encoder(task_i)
        with one_cpu_thread(torch.device("cpu")):
            mu, _ = self.actor(torch.as_tensor(obs[None], dtype=torch.float32), task_i, enc)
            return torch.tanh(mu)[0].numpy()

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        torch.save(self, buf)
        return buf.getvalue()

    @staticmethod
    def from_bytes(blob: bytes) -> "Policy":
        # Bytes this process's parent wrote a moment ago, never a file.
        return torch.load(io.BytesIO(blob), weights_only=False)


@dataclass(frozen=True)
class TaskSpec:
    """What a worker needs to build one task's evaluation environment."""

    index: int
    name: str
    goals: tuple
    env_cfg: EnvConfig
    seed: int

    def build(self) -> MetaWorldTaskEnv:
        return MetaWorldTaskEnv(self.name, self.goals, self.env_cfg,
                                task_seed(self.seed, self.index), normalize=False)


def run_task(policy: Policy, env: MetaWorldTaskEnv, spec: TaskSpec,
             episodes: int) -> tuple[float, float]:
    """``episodes`` deterministic episodes of one task, each ending at its first success (with
    ``eval_ends_at_success``) or at the episode length; returns the success rate and the mean
    summed raw reward. With resampled
    goals episode ``k`` runs on the task's ``k``-th goal, as :func:`ptsl.core.evaluation.evaluate`
    does."""
    success = np.zeros(episodes, dtype=np.float64)
    returns = np.zeros(episodes, dtype=np.float64)
    resample = spec.env_cfg.goals == "resample"
    for ep in range(episodes):
        obs, _ = env.reset(options={"goal": ep} if resample else None)
        for _ in range(spec.env_cfg.episode_length):
            obs, _reward, _term, _trunc, info = env.step(policy.act(obs, spec.index))
            returns[ep] += info["raw_reward"]
            faults.point("eval")
            if info["success"] > 0:
                success[ep] = 1.0
                if spec.env_cfg.eval_ends_at_success:
                    break
    return float(success.mean()), float(returns.mean())


#: A worker's environments, built on first use (one per task it has evaluated).
_WORKER_ENVS: dict[int, MetaWorldTaskEnv] = {}


def _worker_init() -> None:
    torch.set_num_threads(1)


def _worker_task(blob: bytes, spec: TaskSpec, episodes: int) -> tuple[float, float]:
    if spec.index not in _WORKER_ENVS:
        _WORKER_ENVS[spec.index] = spec.build()
    return run_task(Policy.from_bytes(blob), _WORKER_ENVS[spec.index], spec, episodes)


class TaskEvaluator:
    """Every task of ``tasks`` evaluated on its own to success (see the module docstring), in
    ``workers`` processes (1: in this process). Has the ``tasks`` and ``close()`` of the
    lock-step evaluation environment it replaces."""

    def __init__(self, tasks: TaskSet, env_cfg: EnvConfig, seed: int, workers: int = 1) -> None:
        self.tasks = tasks
        self.num_tasks = tasks.num_tasks
        self.specs = [TaskSpec(i, name, tasks.goals[i], env_cfg, seed)
                      for i, name in enumerate(tasks.names)]
        self.workers = max(1, min(workers, self.num_tasks))
        self._envs: dict[int, MetaWorldTaskEnv] = {}
        self._pool: ProcessPoolExecutor | None = None

    def evaluate(self, agent: MultiTaskSAC, episodes: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-task success rates and mean returns, in task order."""
        policy = Policy.of(agent)
        if self.workers == 1:
            results = [run_task(policy, self._env(spec), spec, episodes) for spec in self.specs]
        else:
            blob = policy.to_bytes()
            pool = self._workers()
            futures = [pool.submit(_worker_task, blob, spec, episodes) for spec in self.specs]
            results = [f.result() for f in futures]
        success, returns = zip(*results)
        return np.asarray(success), np.asarray(returns)

    def _env(self, spec: TaskSpec) -> MetaWorldTaskEnv:
        if spec.index not in self._envs:
            self._envs[spec.index] = spec.build()
        return self._envs[spec.index]

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a forked child would inherit torch's thread pool and MuJoCo state.
            self._pool = ProcessPoolExecutor(self.workers, initializer=_worker_init,
                                             mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

