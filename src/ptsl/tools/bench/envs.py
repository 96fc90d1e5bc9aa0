"""Environment throughput: raw Meta-World on one core (the fast step the project runs, and the
stock step), the multi-task vector environment (sync and async), and collection with the policy
in the loop, each as a fraction of the raw rate; then, per task, one step three ways on the
same states (:mod:`.steps`): stock, fast and MuJoCo's own work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...core.agent.buffer import ReplayBuffer
from ...core.config import EnvConfig
from ...core.envs import MultiTaskVecEnv, TaskSet, load_tasks, metaworld_class
from .steps import measure_steps
from .timing import Work, interleave

RAW = "raw Meta-World env, one core"
RAW_STOCK = "raw Meta-World env, stock step, one core"


def _raw_work(tasks: TaskSet, env_cfg: EnvConfig, seed: int, fast: bool = True
              ) -> tuple[Work, Callable]:
    """Meta-World's environment classes (with the fast step unless ``fast`` is false), no
    wrapper, one task after another in this process: one whole episode of each task per call,
    its reset included."""
    envs = []
    for name, goals in zip(tasks.names, tasks.goals):
        env = metaworld_class(name, fast)(reward_function_version=env_cfg.reward_version)
        env.max_path_length = env_cfg.episode_length
        env.set_task(goals[0])
        env.reset()
        envs.append(env)
    rng = np.random.default_rng(seed)
    length = env_cfg.episode_length

    def work() -> float:
        for env in envs:
            for a in rng.uniform(-1, 1, size=(length, 4)).astype(np.float32):
                env.step(a)
            env.reset()
        return length * len(envs)

    return work, lambda: [e.close() for e in envs]


def _vector_work(env: MultiTaskVecEnv, seed: int,
                 policy: Callable[[np.ndarray], np.ndarray] | None = None,
                 buffer: ReplayBuffer | None = None) -> Work:
    """One whole episode of every task per call, the reset that ends it included; with
    ``policy`` and ``buffer``, the collection half of the training loop (act, step, store)."""
    rng = np.random.default_rng(seed)
    state = {"obs": env.reset()}

    def work() -> float:
        truncated = False
        while not truncated:
            obs = state["obs"]
            action = policy(obs) if policy else env.sample_actions(rng)
            res = env.step(action)
            if buffer is not None:
                buffer.add(obs, action, res.reward, res.obs, 1.0 - res.terminated, env.task_ids)
            state["obs"], truncated = res.obs, res.truncated
        state["obs"] = env.reset()
        return env.episode_length * env.num_tasks

    return work


def measure_envs(env_cfg: EnvConfig, task_cache: Path | None, *, rounds: int, quick: bool,
                 policy_factory: Callable[[int], Callable[[np.ndarray], np.ndarray]],
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Environment steps per second of each setting, and each as a fraction of the raw rate
    (``rates``); per task, the step stock, fast and MuJoCo's own work (``steps``: MT10's tasks
    with ``quick``, else MT50's).

    ``policy_factory(num_tasks)`` gives the stochastic policy used for collection.
    """
    rates = _measure_rates(env_cfg, task_cache, rounds=rounds, quick=quick,
                           policy_factory=policy_factory, progress=progress)
    mt10 = load_tasks("mt10", 1, task_cache)
    per_task = mt10 if quick else load_tasks("mt50", 1, task_cache)
    steps = measure_steps(per_task, env_cfg, mt10.names, rounds=rounds,
                          steps=30 if quick else env_cfg.episode_length, progress=progress)
    return {"rates": rates, "steps": steps}


def _measure_rates(env_cfg: EnvConfig, task_cache: Path | None, *, rounds: int, quick: bool,
                   policy_factory: Callable[[int], Callable[[np.ndarray], np.ndarray]],
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    mt10 = load_tasks("mt10", 1, task_cache)
    benches = {"mt10": mt10} if quick else {"mt10": mt10, "mt50": load_tasks("mt50", 1, task_cache)}
    # Every contender does whole episodes, so each round holds the same share of resets (a
    # Meta-World reset runs dozens of physics steps): a window that cut episodes would charge
    # some contenders more resets than others.
    raw, close_raw = _raw_work(mt10, env_cfg, seed=0)
    raw_stock, close_raw_stock = _raw_work(mt10, env_cfg, seed=0, fast=False)
    contenders: dict[str, Work] = {RAW: raw, RAW_STOCK: raw_stock}
    opened: list[MultiTaskVecEnv] = []
    for bench, tasks in benches.items():
        for mode in ("sync", "async"):
            env = MultiTaskVecEnv(tasks, env_cfg, 1, vector=mode)
            opened.append(env)
            contenders[f"{bench.upper()} vector env, {mode}"] = _vector_work(env, 1)
    collect_env = MultiTaskVecEnv(mt10, env_cfg, 1, vector="sync")
    opened.append(collect_env)
    buffer = ReplayBuffer(200_000, collect_env.obs_dim, collect_env.action_dim)
    contenders["MT10 collection, sync, policy in the loop"] = _vector_work(
        collect_env, 2, policy=policy_factory(mt10.num_tasks), buffer=buffer)
    try:
        rates = interleave(contenders, rounds, progress=progress)
    finally:
        close_raw()
        close_raw_stock()
        for env in opened:
            env.close()
    # Fractions are paired within each round (median of the rounds' ratios), as every ratio
    # of the benchmark.
    return {name: {"env_steps_per_s": rates.median(name),
                   "fraction_of_raw": rates.ratio(name, RAW)}
            for name in contenders}
