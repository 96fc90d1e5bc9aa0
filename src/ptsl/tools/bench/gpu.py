"""Several runs sharing one GPU: aggregate updates per second with 1, 2, 4 and 8 processes,
each replaying the captured update of an MT-SAC agent at paper size (what a training stage runs
on CUDA), under NVIDIA MPS when its control program is there (as ``python -m ptsl.ops.grid
--mps`` runs stages), else time-sliced. A worker that dies or does not report ends the section at
once, naming it; the counts measured before it are kept (:mod:`.workers`)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .record import SectionFailed
from .workers import SPAWN, WorkerFailed, run_workers

#: Seconds a worker may take to start, build its agent and capture its update (several CUDA
#: contexts start at once under MPS), on top of the measured seconds.
STARTUP_S = 180.0


def _worker(params_path: str, task_names: tuple[str, ...], seconds: float,
            barrier: Any) -> float:
    import torch

    from ...ops.params import load_params
    from .updates import captured_update

    step = captured_update(load_params(params_path), "mt10_mtsac", task_names,
                           torch.device("cuda"))
    for _ in range(20):  # warm-up and capture
        step()
    torch.cuda.synchronize()
    barrier.wait(STARTUP_S)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            step()
            n += 1
        torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


#: The note :func:`under_mps` gives when the daemon runs.
UNDER_MPS = "under MPS"


@contextlib.contextmanager
def under_mps(log_dir: Path) -> Iterator[str]:
    """Inside the block, processes spawned from here share the GPU under an MPS control daemon
    (started here and quit at the end, unless one was running already), its settings in this
    process's environment, which is restored afterwards. Yields ``"under MPS"``, or ``"without
    MPS: <why>"`` where there is no control program (the processes are then time-sliced)."""
    from ...ops.mps import MpsDaemon, MpsError, control_program

    try:
        control_program()
        daemon: MpsDaemon | None = MpsDaemon.for_node(log_dir)
    except MpsError as exc:
        daemon, note = None, f"without MPS: {exc}"
    saved = dict(os.environ)
    try:
        if daemon is not None:
            daemon.start()
            os.environ.update(daemon.env())  # the spawned workers inherit it
            note = UNDER_MPS
        yield note
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if daemon is not None:
            daemon.stop()


def measure_sharing(params_path: str, task_names: tuple[str, ...],
                    runs: tuple[int, ...] = (1, 2, 4, 8), seconds: float = 10.0,
                    log_dir: Path = Path(".scratch/bench/mps-log")) -> dict[str, Any]:
    """Aggregate and per-run updates per second for each number of concurrent runs; ``mps``
    says whether they ran under MPS (a daemon this call started is quit at its end). A failed
    worker raises :class:`SectionFailed` holding the counts measured before it."""
    rows: dict[str, Any] = {}
    failure: str | None = None
    with under_mps(log_dir) as mps_note:
        for n in runs:
            try:
                rates = run_workers(_worker, (params_path, task_names, seconds, SPAWN.Barrier(n)),
                                    n, timeout=STARTUP_S + seconds)
            except WorkerFailed as exc:  # more runs would meet the same cause: stop here
                failure = f"{n} run(s) sharing the GPU: {exc}"
                break
            rows[str(n)] = {"aggregate_updates_per_s": sum(rates),
                            "per_run_updates_per_s": sum(rates) / n}
    result = {"runs": rows, "mps": mps_note == UNDER_MPS, "mps_note": mps_note}
    if failure is not None:
        raise SectionFailed(failure, result)
    return result
