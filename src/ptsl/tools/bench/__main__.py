"""Benchmark: ``python -m ptsl.tools.bench`` (``make bench``).

Measures, on this machine and in one run, interleaved so that ratios survive a noisy machine:
environment throughput (raw Meta-World on one core, the MT10/MT50 vector environments sync and
async, collection with the policy in the loop); the GEMM rate and each update's FLOPs against
that floor; updates per second at paper size for every method (eager, and on CUDA captured)
beside Stable-Baselines3's SAC step; the real training loop end to end on MT10; on CUDA, several
runs sharing one GPU; a node's table (the MT10 table's rows as separate processes at once, their
summed rate and what limits it; on a CPU a small stand-in). Prints a table and writes JSON to
``reports/bench/<device>.json``, rewritten as each section finishes: a section that fails (named in the file and in the last line,
exit status 1) leaves the others' figures on disk.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from ...cli import ArgumentParser, Bounded, real, whole
from ...core.envs import load_tasks
from ...core.runtime import Runtime, precision
from ...ops.machine import package_versions
from ...ops.params import Params, load_params
from ...ops.paths import TASK_CACHE
from ...ops.stage import run_stage
from .envs import measure_envs
from .gpu import measure_sharing
from .loop import measure_loop
from .node import TABLE_METHODS, measure_node
from .record import SECTIONS, Record, parse_only
from .report import costs, targets
from .study import measure_study
from .table import print_head, print_section, print_summary
from .updates import measure_updates, method_rows, paper_agent

PACKAGES = ("torch", "numpy", "metaworld", "mujoco", "gymnasium", "stable-baselines3")


def _device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"type": device.type, "threads": torch.get_num_threads(),
                            "cpu": _cpu_name(), "logical_cpus": _cpu_count(), **precision()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def _parser() -> ArgumentParser:
    """The command line: what to measure, where to write it, and the per-device sizes."""
    ap = ArgumentParser(prog="python -m ptsl.tools.bench", description=__doc__)
    ap.add_argument("--params", default="params.yaml", help="experiments whose sizes are measured")
    ap.add_argument("--out", default="reports/bench", help="folder of the JSON record")

    def per_device(flag: str, kind: Bounded, what: str, cpu: str, cuda: str) -> None:
        ap.add_argument(flag, type=kind, default=None,
                        help=f"{what} (default: {cpu} on CPU, {cuda} on CUDA)")

    per_device("--rounds", whole(1), "interleaved rounds per comparison", "12", "5")
    per_device("--updates", whole(1), "updates per contender and round", "1", "50")
    ap.add_argument("--threads", type=whole(1), default=None,
                    help="torch threads (default: 1 on CPU, the one-core figures; torch's own "
                         "choice on CUDA); PTSL_THREADS overrides the default")
    per_device("--loop-steps", whole(1), "measured vector steps of the end-to-end loop", "40",
               "600")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections to run, in the benchmark's order "
                         f"({', '.join(SECTIONS)}; default: all)")
    ap.add_argument("--study", default="studies/mt10-cpu",
                    help="the study whose rows the study section measures against their floor "
                         "(default: %(default)s)")
    per_device("--node-seeds", whole(1), "seeds per row in the node section", "1", "3")
    per_device("--node-seconds", real(0), "seconds the node section measures", "20", "120")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: MT10 only, one round, few steps (figures are rough)")
    return ap


def _node(args: argparse.Namespace, params: Params, runtime: Runtime, cuda: bool,
          progress: Callable[[str], None]) -> dict[str, Any]:
    """The node section: the MT10 table's rows as separate processes at once."""
    rows = {m: r for m, r in method_rows(params).items() if m in TABLE_METHODS}
    if args.quick:  # a smoke run: two rows, one seed, a few seconds
        rows = dict(list(rows.items())[:2])
    seeds = args.node_seeds or (1 if args.quick or not cuda else 3)
    seconds = args.node_seconds or (3.0 if args.quick else (120.0 if cuda else 20.0))
    # One torch thread a process, as the grid runs each stage, and the environments stepped
    # in it unless PTSL_VECTOR says otherwise: the processes share the cores.
    one = dataclasses.replace(runtime, threads=1, vector="sync" if runtime.vector == "auto"
                              else runtime.vector)
    common = dict(warmup=1 if args.quick else 10, seconds=seconds,
                  interval=0.5 if args.quick else 5.0, progress=progress)
    return measure_node(args.params, rows, one, TASK_CACHE, seeds=seeds, **common)


def _measures(args: argparse.Namespace, params: Params, runtime: Runtime, device: torch.device,
              rounds: int, updates: int, loop_steps: int,
              progress: Callable[[str], None]) -> dict[str, Callable[[], dict[str, Any]]]:
    """Each section's measurement by name, sized for this run."""
    cuda = device.type == "cuda"
    mt10 = load_tasks("mt10", 1, TASK_CACHE)

    def envs() -> dict[str, Any]:
        policy_agent = paper_agent(params, "mt10_mtsac", mt10.names, device)

        def policy_factory(num_tasks: int):
            import numpy as np

            task_ids = np.arange(num_tasks)
            return lambda obs: policy_agent.act(obs, task_ids, deterministic=False)

        return measure_envs(params.env, TASK_CACHE, rounds=rounds, quick=args.quick,
                            policy_factory=policy_factory, progress=progress)

    def update_rows() -> dict[str, Any]:
        return measure_updates(params, mt10.names, device, rounds=rounds, updates=updates,
                               progress=progress)

    def loop() -> dict[str, Any]:
        # --quick: a smoke run of the loop's measurement on MT-SAC (every method's loop runs in
        # the pipeline's tests); the full run measures every method.
        return measure_loop(params, runtime, TASK_CACHE, warmup=2 if args.quick else 10,
                            measured=loop_steps, progress=progress,
                            only=("mtsac",) if args.quick else None)

    def sharing() -> dict[str, Any]:
        return measure_sharing(args.params, mt10.names,
                               runs=(1, 2) if args.quick else (1, 2, 4, 8),
                               seconds=3.0 if args.quick else 10.0)

    def study() -> dict[str, Any]:
        return measure_study(Path(args.study), runtime, TASK_CACHE, rounds=rounds,
                             warmup=2 if args.quick else 20,
                             measured=loop_steps if args.quick else 300,
                             first_only=args.quick, progress=progress)

    return {"envs": envs, "updates": update_rows, "loop": loop, "study": study,
            "gpu": sharing, "node": lambda: _node(args, params, runtime, cuda, progress)}


def main() -> None:
    args = _parser().parse_args()
    sections = parse_only(args.only)
    runtime = Runtime.from_env()
    device = runtime.torch_device()
    threads = args.threads or runtime.threads or (1 if device.type == "cpu" else 0)
    # PTSL_GRAPH and PTSL_VECTOR as the environment says, as training runs.
    runtime = dataclasses.replace(runtime, device=device.type, threads=threads)
    runtime.apply()  # the same process set-up as a training stage
    cuda = device.type == "cuda"
    rounds = 1 if args.quick else (args.rounds or (5 if cuda else 12))
    updates = args.updates or (1 if args.quick else (50 if cuda else 1))
    loop_steps = args.loop_steps or (3 if args.quick else (600 if cuda else 40))
    params = load_params(args.params)
    started = time.perf_counter()

    def progress(msg: str) -> None:
        print(f"  [{time.perf_counter() - started:6.0f} s] {msg}", file=sys.stderr, flush=True)

    measures = _measures(args, params, runtime, device, rounds, updates, loop_steps, progress)
    out = Path(args.out) / f"{'cuda' if cuda else 'cpu'}{'-quick' if args.quick else ''}.json"
    record = Record(out, {"device": _device_info(device),
                          "versions": package_versions(PACKAGES, missing="not installed"),
                          "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                          "quick": args.quick, "rounds": rounds, "only": list(sections),
                          "methods": {m: label for m, (label, _) in
                                      method_rows(params).items()}},
                    summarise=lambda result: {"targets": targets(result),
                                              "costs": costs(result, Path(args.params))})
    print_head(record.result)
    for name in sections:
        if name == "gpu" and not cuda:
            record.skip(name, "no CUDA device")
        else:
            progress(f"section {name}")
            record.run(name, measures[name])
        print_section(name, record.result)
    print_summary(record.result)
    print(f"\nwritten: {out} ({record.result['wall_seconds']:.0f} s)")
    failed = record.failures()
    if failed:
        raise SystemExit("error: benchmark section(s) failed: "
                         + "; ".join(f"{name}: {why}" for name, why in failed.items())
                         + f"; what the others measured is in {out}")


if __name__ == "__main__":
    run_stage(main)
