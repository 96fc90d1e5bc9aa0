"""The benchmark's study section is a CPU section on every machine: whatever the process's runtime
asks for, its loop and its parts run on one CPU thread, and the process's thread count comes back
after it (on a GPU machine the loop had run on the GPU beside parts timed on the CPU)."""

from __future__ import annotations

import torch

from ptsl.core.runtime import Runtime
from ptsl.tools.bench.study import measure_study

from ..conftest import ROOT


def test_the_study_section_runs_on_one_cpu_thread_and_gives_the_process_its_threads_back(
        task_cache):
    prior = torch.get_num_threads()
    torch.set_num_threads(2)
    seen: list[int] = []
    try:
        record = measure_study(ROOT / "studies" / "mt10-cpu", Runtime(device="auto", threads=2),
                               task_cache, rounds=1, warmup=1, measured=2, first_only=True,
                               progress=lambda _: seen.append(torch.get_num_threads()))
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(prior)
    assert record["device"] == "cpu" and record["threads"] == 1
    assert seen and set(seen) == {1}  # every step it reported ran on one thread
    assert after == 2
    (row,) = record["rows"].values()
    assert row["experiment"] == "mt10_mtsac" and row["vector_steps_per_s"] > 0
