"""Several runs sharing one GPU: aggregate updates per second with 1, 2, 4 and 8 processes,
each replaying the captured update of an MT-SAC agent at paper size (what a training stage runs
on CUDA), under NVIDIA MPS when its control program is there (as ``python -m ptsl.ops.grid
--mps`` runs stages), else time-sliced."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any


def _worker(params_path: str, task_names: tuple[str, ...], seconds: float, barrier: Any,
            out: Any) -> None:
    import torch

    from ...ops.params import load_params
    from .updates import captured_update

    step = captured_update(load_params(params_path), "mt10_mtsac", task_names,
                           torch.device("cuda"))
    for _ in range(20):  # warm-up and capture
        step()
    torch.cuda.synchronize()
    barrier.wait()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            step()
            n += 1
        torch.cuda.synchronize()
    out.put(n / (time.perf_counter() - t0))


def measure_sharing(params_path: str, task_names: tuple[str, ...],
                    runs: tuple[int, ...] = (1, 2, 4, 8), seconds: float = 10.0,
                    log_dir: Path = Path(".scratch/bench/mps-log")) -> dict[str, Any]:
    """Aggregate and per-run updates per second for each number of concurrent runs; ``mps``
    says whether they ran under MPS (a daemon this call started is quit at its end)."""
    from ...ops.mps import MpsDaemon, MpsError, control_program

    try:
        control_program()
        daemon: MpsDaemon | None = MpsDaemon.for_node(log_dir)
    except MpsError as exc:
        daemon, why = None, str(exc)
    ctx = mp.get_context("spawn")
    rows: dict[str, Any] = {}
    saved = dict(os.environ)
    try:
        if daemon is not None:
            daemon.start()
            os.environ.update(daemon.env())  # the spawned workers inherit it
        for n in runs:
            barrier, out = ctx.Barrier(n), ctx.Queue()
            procs = [ctx.Process(target=_worker,
                                 args=(params_path, task_names, seconds, barrier, out))
                     for _ in range(n)]
            for p in procs:
                p.start()
            rates = [out.get(timeout=600) for _ in procs]
            for p in procs:
                p.join()
            rows[str(n)] = {"aggregate_updates_per_s": sum(rates),
                            "per_run_updates_per_s": sum(rates) / n}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if daemon is not None:
            daemon.stop()
    return {"runs": rows, "mps": daemon is not None,
            "mps_note": "under MPS" if daemon is not None else f"without MPS: {why}"}
