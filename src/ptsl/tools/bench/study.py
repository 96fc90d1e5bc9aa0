"""A study's settings against their floor (``--study``, default studies/mt10-cpu): per row, the
real training loop's vector steps per second on one thread, its update and its collection (act,
step, store) timed interleaved with the GEMM rate, and the loop's time per vector step over
the floor its two parts need: collection at the measured rate plus the update's matrix work at
the GEMM rate.

A CPU section on every machine: its floor is one core's GEMM rate and collection, so on a CUDA
machine the loop runs on one CPU thread too, and every column comes from one device (a lease of
2026-11-28 showed the loop on the GPU beside parts on the CPU: loop/floor 0.26-0.39)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...core.agent.buffer import ReplayBuffer
from ...core.agent.builders import Shapes, build_agent
from ...core.envs import MultiTaskVecEnv, load_tasks
from ...core.loop import train
from ...core.runtime import Runtime
from ...ops.params import load_params, run_config
from .envs import _vector_work
from .loop import INIT_STEPS, measured_run
from .timing import Work, interleave
from .updates import GEMM, gemm_work, random_buffer, update_flops


def _updates(agent: Any, buffer: ReplayBuffer, batch: int, updates: int) -> Work:
    rng = np.random.default_rng(0)

    def work() -> float:
        for _ in range(updates):
            agent.update(buffer.sample(batch, rng, agent.device))
        return updates

    return work


def _loop_rate(cfg: Any, runtime: Runtime, task_cache: Path | None, warmup: int,
               measured: int) -> float:
    """Vector steps per second of the real training loop after ``warmup`` updating steps."""
    total = INIT_STEPS + warmup + measured
    cfg = measured_run(cfg, total)  # the study's own batch; its warm-up is 1,500 in training
    stamps: dict[int, float] = {}

    def on_step(done: int) -> None:
        if done in (INIT_STEPS + warmup, total):
            stamps[done] = time.perf_counter()

    train(cfg, task_cache=task_cache, progress=False, runtime=runtime, on_step=on_step)
    return measured / (stamps[total] - stamps[INIT_STEPS + warmup])


def measure_study(study: Path, runtime: Runtime, task_cache: Path | None, *, rounds: int,
                  warmup: int, measured: int, first_only: bool = False,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Per row of the study's params (``first_only``: its first row, a smoke run): loop, update
    and collection, and the loop over its floor."""
    params = load_params(study / "params.yaml")
    runtime = dataclasses.replace(runtime, device="cpu", threads=1)
    prior = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = _rows(params, runtime, task_cache, rounds=rounds, warmup=warmup,
                     measured=measured, first_only=first_only, progress=progress)
        threads = torch.get_num_threads()  # after the loops: what they ran with
    finally:
        torch.set_num_threads(prior)
    return {"study": str(study), "device": str(runtime.torch_device()), "threads": threads,
            "rows": rows}


def _rows(params: Any, runtime: Runtime, task_cache: Path | None, *, rounds: int,
          warmup: int, measured: int, first_only: bool,
          progress: Callable[[str], None] | None) -> dict[str, Any]:
    device = runtime.torch_device()  # the CPU runtime measure_study passes
    rows: dict[str, Any] = {}
    for name in params.trained[:1] if first_only else params.trained:
        cfg = run_config(params, name, 1)
        label = cfg.experiment.label or name
        if progress:
            progress(f"study row {label}")
        tasks = load_tasks(cfg.experiment.benchmark, 1, task_cache)
        env = MultiTaskVecEnv(tasks, cfg.env, 1, vector="sync")
        try:
            agent = build_agent(cfg, Shapes(env.obs_dim, env.action_dim, env.num_tasks),
                                tasks.names, device)
            batch = cfg.sac.batch_size
            buffer = random_buffer(env.num_tasks)
            flops = update_flops(agent, buffer, device, batch)
            ids = env.task_ids
            store = ReplayBuffer(200_000, env.obs_dim, env.action_dim)
            collect = _vector_work(env, 2, buffer=store,
                                   policy=lambda obs: agent.act(obs, ids, deterministic=False))
            works = {GEMM: gemm_work(device), "collection": collect,
                     "update": _updates(agent, buffer, batch, 20)}
            rates = interleave(works, rounds, progress=progress)
        finally:
            env.close()
        update_ms = 1000.0 / rates.median("update")
        collection_ms = 1000.0 * env.num_tasks / rates.median("collection")  # per vector step
        matrix_ms = 1000.0 * flops / rates.median(GEMM)
        loop = _loop_rate(cfg, runtime, task_cache, warmup, measured)
        floor_ms = collection_ms + matrix_ms
        rows[label] = {"experiment": name, "hidden_dim": cfg.experiment.hidden_dim,
                       "batch": batch, "vector_steps_per_s": loop, "loop_ms": 1000.0 / loop,
                       "update_ms": update_ms, "update_gflop": flops / 1e9,
                       "update_matrix_ms": matrix_ms, "collection_ms": collection_ms,
                       "floor_ms": floor_ms, "loop_over_floor": 1000.0 / loop / floor_ms}
    return rows
