"""A node's table: the MT10 table's rows trained side by side, one process per (row, seed) as the
grid places stages on one machine (under NVIDIA MPS on CUDA when its control program is there),
each the real training loop at the paper's settings on one thread. Every process warms up, all
start their measured window together, and each counts its vector steps for the same seconds;
meanwhile the busy cores and, on CUDA, the GPU's busy time are sampled. The figures: each run's
vector steps per second, their sum (the node's rate), and what limits it (the GPU busy all the
time, every core busy, or neither: the processes wait on each other or on start-up)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.benchmarks import num_tasks
from .gpu import under_mps
from .record import SectionFailed
from .workers import SPAWN, WorkerFailed, run_workers

#: The MT10 table's rows: the paper's five methods (their rows of ``method_rows``).
TABLE_METHODS = ("mtsac", "softmod", "care", "care_ptsl", "sac_ptsl")
#: Seconds a process may take to start, build its environments and agent and warm up.
STARTUP_S = 600.0
#: GPU busy share, and busy cores as a share of the machine's, above which that is the limit.
BUSY = 0.9


class _Measured(Exception):
    """Raised from the loop's step callback once the window is measured: ends the run there."""


def _worker(params_path: str, experiment: str, seed: int, runtime: Any,
            task_cache: Path | None, warmup: int, seconds: float, barrier: Any) -> dict[str, Any]:
    """One process of the node: one seed's run."""
    from ...core.loop import train
    from ...ops.params import load_params, run_config
    from .loop import INIT_STEPS, measured_run
    from .updates import PAPER_BATCH

    # No evaluation or checkpoint after the first: the measured window ends the run.
    params = load_params(params_path)
    cfg = measured_run(run_config(params, experiment, seed), 10**9, PAPER_BATCH)
    start_at = INIT_STEPS + warmup
    window: dict[str, float] = {}

    def on_step(done: int) -> None:
        if done == start_at:
            barrier.wait(STARTUP_S)  # every process starts its window together
            window.update(t0=time.perf_counter(), n0=done)
        elif "t0" in window and time.perf_counter() - window["t0"] >= seconds:
            window.update(t1=time.perf_counter(), n1=done)
            raise _Measured

    try:
        train(cfg, task_cache=task_cache, progress=False, runtime=runtime, on_step=on_step)
    except _Measured:
        pass
    return {"experiment": experiment, "seed": seed,
            "vector_steps_per_s": (window["n1"] - window["n0"]) / (window["t1"] - window["t0"])}


class Sampler:
    """Busy cores (from ``/proc/stat``) and the GPU's busy share (``nvidia-smi``, CUDA only),
    sampled every ``interval`` seconds in a thread until :meth:`stop`."""

    def __init__(self, interval: float, gpu: bool) -> None:
        self.interval = interval
        self.gpu = gpu and shutil.which("nvidia-smi") is not None
        self.cores: list[float] = []
        self.gpu_busy: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = _cpu_times()
        while not self._stop.wait(self.interval):
            now = _cpu_times()
            if last is not None and now is not None and now[1] > last[1]:
                busy, total = now[0] - last[0], now[1] - last[1]
                self.cores.append(busy / total * (os.cpu_count() or 1))
            last = now
            if self.gpu:
                share = _gpu_busy()
                if share is not None:
                    self.gpu_busy.append(share)


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies over all cores, or None where /proc/stat is not there."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _gpu_busy() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=10).stdout.split()
        return float(out[0]) / 100.0
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def limit(gpu_busy: float | None, busy_cores: float | None, cores: int) -> str:
    """What limits the node, read from the mean GPU busy share and mean busy cores."""
    if gpu_busy is not None and gpu_busy >= BUSY:
        return f"the GPU (busy {gpu_busy:.0%} of the time)"
    if busy_cores is not None and busy_cores >= BUSY * cores:
        return f"the cores ({busy_cores:.1f} of {cores} busy)"
    seen = [f"GPU busy {gpu_busy:.0%}" if gpu_busy is not None else "GPU not sampled",
            f"{busy_cores:.1f} of {cores} cores busy" if busy_cores is not None
            else "cores not sampled"]
    return f"neither: the runs wait on each other or on the host ({', '.join(seen)})"


def measure_node(params_path: str, rows: dict[str, tuple[str, str]], runtime: Any,
                 task_cache: Path | None, *, seeds: int, warmup: int, seconds: float,
                 interval: float = 5.0, progress: Callable[[str], None] | None = None,
                 log_dir: Path = Path(".scratch/bench/mps-log")) -> dict[str, Any]:
    """Every row of ``rows`` (method -> (label, experiment)) times ``seeds`` seeds at once, one
    process each; their rates, sum and limit. A process that fails ends the section, named.
    (Several seeds trained in one process were measured slower than separate processes on
    every machine tried: reports/bench/HISTORY.md.)"""
    cuda = runtime.torch_device().type == "cuda"
    jobs = [(label, exp, seed) for label, exp in rows.values() for seed in range(1, seeds + 1)]
    runs = len(jobs)
    if progress:
        progress(f"node: {runs} runs at once ({len(rows)} rows x {seeds} seed(s), one process "
                 f"each), {seconds:.0f} s measured")
    barrier = SPAWN.Barrier(len(jobs))
    sampler = Sampler(interval, gpu=cuda)
    with under_mps(log_dir) if cuda else contextlib.nullcontext("no GPU") as mps_note:
        sampler.start()
        try:
            rates = _run_jobs(params_path, jobs, runtime, task_cache, warmup, seconds, barrier)
        finally:
            sampler.stop()
    cores = os.cpu_count() or 1
    # The samples of the measured window: the last ``seconds`` of the section.
    window = max(1, int(seconds / interval))
    busy = _mean(sampler.cores[-window:])
    gpu_busy = _mean(sampler.gpu_busy[-window:]) if cuda else None
    by_row: dict[str, Any] = {}
    for (label, exp, _), rate in zip(jobs, rates):
        row = by_row.setdefault(label, {"experiment": exp, "vector_steps_per_s_each": []})
        row["vector_steps_per_s_each"].append(rate["vector_steps_per_s"])
    for row in by_row.values():
        row["together"] = sum(row["vector_steps_per_s_each"])
    return {"runs": runs, "seeds": seeds, "seconds": seconds, "rows": by_row,
            "vector_steps_per_s": sum(r["together"] for r in by_row.values()),
            "cores": cores, "busy_cores": busy, "gpu_busy": gpu_busy,
            "limit": limit(gpu_busy, busy, cores), "mps_note": mps_note,
            "vector": runtime.vector_mode(num_tasks("mt10")), "threads": runtime.threads,
            "cuda_wait": runtime.wait if cuda else None}


def _job(index: int, params_path: str, jobs: list[tuple[str, str, int]], runtime: Any,
         task_cache: Path | None, warmup: int, seconds: float, barrier: Any) -> dict[str, Any]:
    _, experiment, seed = jobs[index]
    try:
        return _worker(params_path, experiment, seed, runtime, task_cache, warmup, seconds,
                       barrier)
    except Exception as exc:  # the report names the run, not only the worker's number
        raise RuntimeError(f"{experiment}-{seed}: {type(exc).__name__}: {exc}") from exc


def _run_jobs(params_path: str, jobs: list[tuple[str, str, int]], runtime: Any,
              task_cache: Path | None, warmup: int, seconds: float,
              barrier: Any) -> list[dict[str, Any]]:
    """One spawned process per job, started together; a failed one ends the section, named."""
    try:
        return run_workers(_job, (params_path, jobs, runtime, task_cache, warmup, seconds,
                                  barrier), len(jobs), timeout=STARTUP_S + seconds + 60,
                           with_index=True, children=True)
    except WorkerFailed as exc:
        order = ", ".join(f"{exp}-{seed}" for _, exp, seed in jobs)
        raise SectionFailed(f"node: {exc} (workers in order: {order})",
                            {"runs": len(jobs)}) from None
