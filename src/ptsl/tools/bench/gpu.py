"""Several runs sharing one GPU: aggregate updates per second with 1, 2, 4 and 8 processes,
each training an MT-SAC agent at paper size on the fast path."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import numpy as np


def _worker(params_path: str, task_names: tuple[str, ...], seconds: float, barrier: Any,
            out: Any) -> None:
    import torch

    from ...ops.params import load_params
    from .updates import PAPER_BATCH, paper_agent, random_buffer

    device = torch.device("cuda")
    agent = paper_agent(load_params(params_path), "mt10_mtsac", task_names, device, fast=True)
    buffer = random_buffer(len(task_names))
    rng = np.random.default_rng(0)
    for step in range(20):  # warm-up: allocator, kernels
        agent.update(buffer.sample(PAPER_BATCH, rng, device), step)
    torch.cuda.synchronize()
    barrier.wait()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            agent.update(buffer.sample(PAPER_BATCH, rng, device), n)
            n += 1
        torch.cuda.synchronize()
    out.put(n / (time.perf_counter() - t0))


def measure_sharing(params_path: str, task_names: tuple[str, ...],
                    runs: tuple[int, ...] = (1, 2, 4, 8), seconds: float = 10.0
                    ) -> dict[str, Any]:
    """Aggregate and per-run updates per second for each number of concurrent runs."""
    ctx = mp.get_context("spawn")
    rows = {}
    for n in runs:
        barrier, out = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(params_path, task_names, seconds, barrier, out))
                 for _ in range(n)]
        for p in procs:
            p.start()
        rates = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        rows[str(n)] = {"aggregate_updates_per_s": sum(rates),
                        "per_run_updates_per_s": sum(rates) / n}
    return rows
