"""The benchmark keeps what it measured: its record grows section by section on disk, a failing
section leaves the others' figures and names itself, and a worker process that dies is named at
once (real spawned processes, on CPU)."""

from __future__ import annotations

import json
import os
import time

import pytest

from ptsl.core.errors import ConfigError
from ptsl.tools.bench.gpu import measure_sharing
from ptsl.tools.bench.record import SECTIONS, Record, SectionFailed, parse_only
from ptsl.tools.bench.workers import WorkerFailed, run_workers

from ..conftest import ROOT
from .worker_targets import first_dies, hang, report_twice, start_a_child


def test_only_keeps_the_benchmarks_order_and_names_the_allowed_sections():
    assert parse_only("gpu, envs") == ("envs", "gpu")
    assert parse_only(",".join(SECTIONS)) == tuple(SECTIONS)
    for bad in ("envs,update", ",", ""):
        with pytest.raises(ConfigError) as err:
            parse_only(bad)
        assert ("allowed: a comma-separated list of envs, updates, loop, study, gpu, node"
                in str(err.value))
        assert "\n" not in str(err.value)


def _summary(result: dict) -> dict:
    return {"targets": sorted(k for k in SECTIONS.values() if k in result)}


def test_each_section_is_on_disk_when_it_ends_and_a_failure_keeps_the_others(tmp_path):
    path = tmp_path / "cpu.json"
    record = Record(path, {"device": {"type": "cpu"}}, _summary)
    seen_on_disk = {}

    def envs() -> dict:
        return {"raw": {"env_steps_per_s": 100.0}}

    def updates() -> dict:
        seen_on_disk["updates"] = json.loads(path.read_text())  # envs is there already
        raise RuntimeError("capture failed")

    def gpu() -> dict:
        raise SectionFailed("2 run(s) sharing the GPU: worker 2 of 2 exited with code 3",
                            {"runs": {"1": {"aggregate_updates_per_s": 5.0}}})

    assert record.run("envs", envs)
    assert json.loads(path.read_text())["envs"] == {"raw": {"env_steps_per_s": 100.0}}
    assert not record.run("updates", updates)
    assert seen_on_disk["updates"]["sections"] == {"envs": {"status": "done", "seconds": 0.0}}
    assert not record.run("gpu", gpu)

    on_disk = json.loads(path.read_text())
    assert on_disk["envs"] == {"raw": {"env_steps_per_s": 100.0}}
    assert "updates" not in on_disk
    assert on_disk["gpu_sharing"] == {"runs": {"1": {"aggregate_updates_per_s": 5.0}}}
    sections = on_disk["sections"]
    assert sections["envs"]["status"] == "done"
    assert sections["updates"]["status"] == "failed"
    assert sections["updates"]["error"] == "RuntimeError: capture failed"
    assert sections["gpu"] == {"status": "failed", "seconds": sections["gpu"]["seconds"],
                               "error": "2 run(s) sharing the GPU: worker 2 of 2 exited with "
                                        "code 3"}
    assert record.failures() == {"updates": "RuntimeError: capture failed",
                                 "gpu": sections["gpu"]["error"]}
    # The summary is brought up to date and stays last; no temp file is left beside the record.
    assert list(on_disk)[-2:] == ["targets", "wall_seconds"]
    assert on_disk["targets"] == ["envs", "gpu_sharing"]
    assert os.listdir(tmp_path) == ["cpu.json"]


def test_an_interrupted_section_is_recorded_before_the_interruption_goes_on(tmp_path):
    record = Record(tmp_path / "cpu.json", {}, _summary)

    def interrupted() -> dict:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record.run("loop", interrupted)
    on_disk = json.loads((tmp_path / "cpu.json").read_text())
    assert on_disk["sections"]["loop"]["status"] == "interrupted"


def test_workers_report_in_order():
    assert run_workers(report_twice, (4,), 3, timeout=120) == [8, 8, 8]


@pytest.mark.parametrize("how, expect", [
    ("exit", r"worker [123] of 3 exited with code 3 without reporting"),
    ("raise", r"worker [123] of 3 failed: ValueError: refused by the server \(exited with code 1\)"),
])
def test_a_dead_worker_is_named_at_once_and_the_others_are_stopped(tmp_path, how, expect):
    import multiprocessing as mp

    t0 = time.monotonic()
    with pytest.raises(WorkerFailed, match=f"^{expect}$"):
        run_workers(first_dies, (str(tmp_path / "claim"), how), 3, timeout=300)
    # Named long before the bounded wait ends: the wait polls the processes (about a second
    # here; starting three interpreters takes longer on a busy machine).
    assert time.monotonic() - t0 < 30
    assert not mp.active_children()


def test_a_worker_that_never_reports_is_given_up_on_after_the_bounded_wait():
    import multiprocessing as mp

    t0 = time.monotonic()
    with pytest.raises(WorkerFailed, match=r"worker\(s\) 1, 2 of 2 did not report within 3 s"):
        run_workers(hang, (1,), 2, timeout=3)
    assert time.monotonic() - t0 < 30
    assert not mp.active_children()


def test_gpu_sharing_names_its_dead_worker_and_keeps_what_it_measured(tmp_path):
    # On a machine without CUDA the real sharing worker dies building its CUDA agent: the
    # section ends at once with the worker's error, instead of waiting on the queue.
    import torch

    if torch.cuda.is_available():
        pytest.skip("the sharing workers would succeed here")
    t0 = time.monotonic()
    with pytest.raises(SectionFailed) as err:
        measure_sharing(str(ROOT / "params.yaml"), ("reach-v3",), runs=(1, 2), seconds=1.0,
                        log_dir=tmp_path)
    assert time.monotonic() - t0 < 90
    assert str(err.value).startswith("1 run(s) sharing the GPU: worker 1 of 1 failed: ")
    assert str(err.value).endswith("(exited with code 1)")
    assert err.value.partial["runs"] == {}


def test_the_node_section_names_a_run_that_fails(tmp_path):
    """A node's process that fails ends the section at once, naming its run (a real spawned
    process: an experiment the params file does not have)."""
    from ptsl.core.runtime import Runtime
    from ptsl.tools.bench.node import measure_node

    with pytest.raises(SectionFailed) as err:
        measure_node(str(ROOT / "params.yaml"), {"x": ("X", "no_such_experiment")},
                     Runtime(device="cpu", threads=1), None, seeds=1, warmup=1, seconds=1.0,
                     interval=0.2, log_dir=tmp_path)
    assert "no_such_experiment-1: " in str(err.value) and "worker 1 of 1" in str(err.value)


def test_what_limits_a_node():
    from ptsl.tools.bench.node import limit

    assert limit(0.97, 10.0, 16) == "the GPU (busy 97% of the time)"
    assert limit(0.5, 15.5, 16) == "the cores (15.5 of 16 busy)"
    assert limit(None, 1.0, 2).startswith("neither: ") and "GPU not sampled" in limit(None, 1, 2)
    assert "cores not sampled" in limit(0.2, None, 16)


def test_workers_that_start_processes_of_their_own():
    """The node's workers may start environment workers (PTSL_VECTOR=async): a daemonic process
    may not, a worker run with ``children`` may."""
    with pytest.raises(WorkerFailed, match="daemonic processes are not allowed to have children"):
        run_workers(start_a_child, (1,), 1, timeout=120)
    assert run_workers(start_a_child, (1,), 2, timeout=120, children=True) == [1, 1]
