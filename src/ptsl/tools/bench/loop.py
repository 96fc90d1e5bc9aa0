"""End to end: vector steps and environment steps per second of the real training loop on MT10
at the paper's settings (networks, batch 1280, one update per vector step), after warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.benchmarks import num_tasks
from ...core.config import TrainConfig
from ...core.loop import train
from ...core.runtime import Runtime
from ...ops.params import Params, run_config
from .updates import PAPER_BATCH, method_rows

#: Random vector steps before the updates start. The paper uses 1,500 and then runs 1,500
#: updates at once; the steady state measured here does not depend on it, so the warm-up is
#: kept short (sampling with replacement gives full batches of 1,280 from the first update).
INIT_STEPS = 5


def measured_run(cfg: Any, steps: int, batch_size: int | None = None) -> Any:
    """``cfg`` as the benchmark's loop measurements run it: ``INIT_STEPS`` random vector steps,
    ``steps`` in all, one evaluation episode per task at the start (and at ``steps``), no
    checkpoint; ``batch_size`` replaces the run's batch where given."""
    sac = {"init_steps": INIT_STEPS, **({} if batch_size is None else {"batch_size": batch_size})}
    return cfg.model_copy(update={
        "sac": cfg.sac.model_copy(update=sac),
        "train": TrainConfig(steps=steps, eval_every=steps, checkpoint_every=steps,
                             eval_episodes=1)})


def measure_loop(params: Params, runtime: Runtime, task_cache: Path | None, *, warmup: int,
                 measured: int, progress: Callable[[str], None] | None = None,
                 only: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the real training loop of every method (or the ``only`` ones) for ``warmup +
    measured`` vector steps and time the last ``measured`` ones (no evaluation falls inside the
    window)."""
    rows: dict[str, Any] = {}
    total = INIT_STEPS + warmup + measured
    methods = method_rows(params)
    runs = [(label, exp, runtime) for name, (label, exp) in methods.items()
            if only is None or name in only]
    for label, exp, rt in runs:
        cfg = measured_run(run_config(params, exp, 1), total, PAPER_BATCH)
        stamps: dict[int, float] = {}
        start_at = INIT_STEPS + warmup

        def on_step(done: int) -> None:
            if done in (start_at, total):
                stamps[done] = time.perf_counter()

        if progress:
            progress(f"end to end: {label}")
        train(cfg, task_cache=task_cache, progress=False, runtime=rt, on_step=on_step)
        seconds = stamps[total] - stamps[start_at]
        rows[label] = {"vector_steps_per_s": measured / seconds,
                       "env_steps_per_s": measured * num_tasks("mt10") / seconds,
                       "measured_vector_steps": measured,
                       "vector": rt.vector_mode(num_tasks("mt10")),
                       "update": rt.update_path(rt.torch_device())}
    return rows
