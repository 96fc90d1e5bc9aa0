"""Evaluation as Meta-World+ runs it (``env.eval_ends_at_success``): an episode ends at its first
success, each task runs its episodes back to back on its own clock, and the tasks' environments
step side by side in worker processes where the machine has cores.

Metaworld's ``evaluation.py`` switches ``terminate_on_success`` on for evaluation and steps every
task until each has finished its episodes; so does this module, except that a task that has
finished its episodes stops stepping. Success is the same as with full-length episodes (success
at any step ends the episode there); returns are summed up to the end of the episode, so they are
shorter.

The policy acts on every task's row at every step (a finished task's row on its last
observation, its action unused), so each action is computed in the same batch whatever the
other tasks are doing, and a task's environment sees only its own actions and resets: the
numbers do not depend on how many processes step the environments.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import faults
from .config import EnvConfig
from .envs import MetaWorldTaskEnv, TaskSet, task_seed

#: ``act(obs, task_ids)``: one action per row (the deterministic policy of an agent).
Act = Callable[[np.ndarray, np.ndarray], np.ndarray]


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


class TaskEnvs:
    """The tasks' evaluation environments, each reset and stepped on its own: in this process
    (``workers=1``) or spread over ``workers`` processes (task ``i`` in process ``i % workers``),
    which step their tasks at the same time."""

    def __init__(self, specs: list[TaskSpec], workers: int = 1) -> None:
        self.specs = specs
        self.workers = max(1, min(workers, len(specs)))
        self._envs: dict[int, MetaWorldTaskEnv] = {}
        self._pipes: list = []
        self._procs: list = []
        #: Environment steps taken so far, over every task (what ending at success saves).
        self.steps = 0

    def _start(self) -> None:
        """Build the environments, or start the workers that build theirs (on first use)."""
        if self.workers == 1:
            self._envs = {s.index: s.build() for s in self.specs}
            return
        # spawn: a forked child would inherit torch's thread pool and MuJoCo state.
        ctx = multiprocessing.get_context("spawn")
        for w in range(self.workers):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(there, self.specs[w::self.workers]),
                               daemon=True)
            proc.start()
            there.close()
            self._pipes.append(here)
            self._procs.append(proc)

    def _call(self, command: str, per_task: dict[int, object]) -> dict[int, tuple]:
        if not self._envs and not self._pipes:
            self._start()
        if self.workers == 1:
            return _apply(self._envs, command, per_task)
        for w, pipe in enumerate(self._pipes):
            pipe.send((command, {i: v for i, v in per_task.items() if i % self.workers == w}))
        out: dict[int, tuple] = {}
        for pipe in self._pipes:
            out.update(pipe.recv())
        return out

    def reset(self, goals: dict[int, int | None]) -> dict[int, tuple]:
        """Reset each task ``i`` of ``goals`` on its goal (None: as the protocol says);
        ``{i: (obs,)}``."""
        return self._call("reset", goals)

    def step(self, actions: dict[int, np.ndarray]) -> dict[int, tuple]:
        """Step each task ``i`` of ``actions``; ``{i: (obs, raw_reward, success)}``."""
        self.steps += len(actions)
        return self._call("step", actions)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        for pipe in self._pipes:
            pipe.send(("close", {}))
        for proc in self._procs:
            proc.join(timeout=30)
        self._envs, self._pipes, self._procs = {}, [], []


def _apply(envs: dict[int, MetaWorldTaskEnv], command: str,
           per_task: dict[int, object]) -> dict[int, tuple]:
    if command == "reset":
        return {i: (envs[i].reset(options=None if g is None else {"goal": g})[0],)
                for i, g in per_task.items()}
    out = {}
    for i, action in per_task.items():
        obs, _reward, _term, _trunc, info = envs[i].step(action)
        out[i] = (obs, info["raw_reward"], info["success"])
    return out


def _worker(pipe, specs: list[TaskSpec]) -> None:
    """A worker process: builds its tasks' environments and serves commands until ``close``."""
    envs = {s.index: s.build() for s in specs}
    try:
        while True:
            command, per_task = pipe.recv()
            if command == "close":
                return
            pipe.send(_apply(envs, command, per_task))
    finally:
        for env in envs.values():
            env.close()


def run_episodes(act: Act, envs: TaskEnvs, num_tasks: int, env_cfg: EnvConfig,
                 episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``episodes`` deterministic episodes of every task, each task on its own clock, each
    episode ending at its first success (with ``eval_ends_at_success``) or at the episode
    length. With resampled goals episode ``k`` runs on the task's ``k``-th goal, as the
    lock-step evaluation does. Returns each task's success rate and mean summed raw reward."""
    success = np.zeros((num_tasks, episodes))
    returns = np.zeros((num_tasks, episodes))
    goal = (lambda k: k) if env_cfg.goals == "resample" else (lambda k: None)
    episode = np.zeros(num_tasks, dtype=np.int64)
    clock = np.zeros(num_tasks, dtype=np.int64)
    obs = np.stack([o for _, (o,) in sorted(envs.reset(
        {i: goal(0) for i in range(num_tasks)}).items())])
    ids = np.arange(num_tasks)
    while (episode < episodes).any():
        actions = act(obs, ids)  # every row, so each action's batch is always the same
        running = [i for i in range(num_tasks) if episode[i] < episodes]
        ended: dict[int, int | None] = {}
        for i, (o, reward, succeeded) in envs.step({i: actions[i] for i in running}).items():
            obs[i], clock[i] = o, clock[i] + 1
            returns[i, episode[i]] += reward
            success[i, episode[i]] = max(success[i, episode[i]], float(succeeded > 0))
            if (succeeded > 0 and env_cfg.eval_ends_at_success) or \
                    clock[i] == env_cfg.episode_length:
                episode[i], clock[i] = episode[i] + 1, 0
                if episode[i] < episodes:
                    ended[i] = goal(int(episode[i]))
        for i, (o,) in envs.reset(ended).items():
            obs[i] = o
        faults.point("eval")
    return success.mean(axis=1), returns.mean(axis=1)


class TaskEvaluator:
    """Every task of ``tasks`` evaluated on its own clock to success (see the module docstring),
    its environments stepped by ``workers`` processes (1: this one). Has the ``tasks`` and
    ``close()`` of the lock-step evaluation environment it replaces."""

    def __init__(self, tasks: TaskSet, env_cfg: EnvConfig, seed: int, workers: int = 1) -> None:
        self.tasks = tasks
        self.num_tasks = tasks.num_tasks
        self.env_cfg = env_cfg
        self.envs = TaskEnvs([TaskSpec(i, name, tasks.goals[i], env_cfg, seed)
                              for i, name in enumerate(tasks.names)], workers)

    @property
    def workers(self) -> int:
        return self.envs.workers

    def evaluate(self, act: Act, episodes: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-task success rates and mean returns, in task order."""
        return run_episodes(act, self.envs, self.num_tasks, self.env_cfg, episodes)

    def close(self) -> None:
        self.envs.close()
