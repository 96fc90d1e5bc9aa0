"""Benchmark: ``python -m ptsl.tools.bench`` (``make bench``).

Measures, on this machine and in one run, interleaved so that ratios survive a noisy machine:
environment throughput (raw Meta-World on one core, the MT10/MT50 vector environments sync and
async, collection with the policy in the loop); the GEMM rate and each update's FLOPs against
that floor; updates per second at paper size for every method (eager, and on CUDA captured)
beside Stable-Baselines3's SAC step; the real training loop end to end on MT10; on CUDA, several
runs sharing one GPU. Prints a table and writes JSON to ``reports/bench/<device>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from ...core.envs import load_tasks
from ...core.files import write_json
from ...core.runtime import Runtime, precision
from ...ops.params import load_params
from ...ops.paths import TASK_CACHE
from ...ops.stage import run_stage
from .envs import measure_envs
from .gpu import measure_sharing
from .loop import measure_loop
from .report import REFERENCE_ENV_STEPS_PER_S, costs, targets
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


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _print_table(result: dict[str, Any]) -> None:
    dev = result["device"]
    print(f"\nptsl benchmark on {dev.get('gpu', dev['cpu'])} ({dev['type']}, "
          f"{dev['threads']} torch thread(s)); figures are medians of interleaved rounds")
    if "envs" in result:
        print("\nEnvironments                                        env steps/s   of raw")
        for name, r in result["envs"].items():
            print(f"  {name:<48} {r['env_steps_per_s']:>10,.0f}   {r['fraction_of_raw']:>5.0%}")
    if "updates" in result:
        up = result["updates"]
        print(f"\nGEMM rate (1280x400 @ 400x400) among the updates: {up['gemm_gflops']:,.1f} "
              f"GFLOP/s (best round {up['gemm_gflops_best']:,.1f}); floor = the update's "
              "matrix-multiply FLOPs / this rate")
        print("\nUpdate at paper size (batch 1280)            updates/s   ms/update  GFLOP  "
              "floor ms  time/floor")
        for name, r in up["rows"].items():
            print(f"  {name:<42} {r['updates_per_s']:>9.2f} {r['ms_per_update']:>11.1f} "
                  f"{r['gflop_per_update']:>6.2f} {r['floor_ms']:>9.1f} {r['time_over_floor']:>10.2f}")
        if up.get("sb3_missing"):
            print(f"  Stable-Baselines3: not measured: {up['sb3_missing']}")
        print("  Paired ratios (median over rounds of same-round ratios):")
        for name, value in up["ratios"].items():
            print(f"  {name}: {value:.2f}x")
    if "loop" in result:
        print("\nTraining loop end to end, MT10, paper settings   vector steps/s  env steps/s  "
              "x reference")
        for name, r in result["loop"].items():
            print(f"  {name:<46} {r['vector_steps_per_s']:>12.1f} {r['env_steps_per_s']:>12,.0f} "
                  f"{r['env_steps_per_s'] / REFERENCE_ENV_STEPS_PER_S:>12.2f}")
    sharing = result.get("gpu_sharing")
    if sharing:
        print(f"\nRuns sharing one GPU (MT-SAC, captured update, {sharing['mps_note']})")
        print(f"  {'':<44} aggregate updates/s   per run")
        for n, r in sharing["runs"].items():
            print(f"  {n} run(s){'':<36} {r['aggregate_updates_per_s']:>12,.0f} "
                  f"{r['per_run_updates_per_s']:>10,.0f}")
    else:
        print("\nRuns sharing one GPU: not measured (no CUDA device)")
    c = result.get("costs")
    if c:
        print("\nCost on this machine, one run at a time")
        for name, hours in c["run_200k_mt10_hours"].items():
            print(f"  200k MT10 run, {name:<38} {hours:>8.1f} h")
        print(f"  the paper's grid ({c['grid_training_stages']} training stages)"
              f"{'':<15} {c['grid_hours_one_at_a_time']:>8.0f} h")
        shared = c.get("grid_hours_shared")
        print(f"  the same grid, {c.get('shared_runs', 8)} runs sharing the GPU{'':<18} "
              + (f"{shared:>8.0f} h" if shared is not None else "not measured (no CUDA device)"))
    print("\nTargets")
    for t in result["targets"]:
        value = "—" if t["value"] is None else f"{t['value']:,.2f}"
        print(f"  [{t['status']:^12}] {t['target']}: {value} (goal {t['goal']})")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m ptsl.tools.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml", help="experiments whose sizes are measured")
    ap.add_argument("--out", default="reports/bench", help="folder of the JSON record")
    ap.add_argument("--rounds", type=int, default=None,
                    help="interleaved rounds per comparison (default: 12 on CPU, 5 on CUDA)")
    ap.add_argument("--updates", type=int, default=None,
                    help="updates per contender and round (default: 1 on CPU, 50 on CUDA)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: 1 on CPU, the one-core figures; torch's own "
                         "choice on CUDA); PTSL_THREADS overrides the default")
    ap.add_argument("--loop-steps", type=int, default=None,
                    help="measured vector steps of the end-to-end loop (default: 40 on CPU, 600 "
                         "on CUDA)")
    ap.add_argument("--only", default="envs,updates,loop,gpu",
                    help="comma-separated sections to run (envs, updates, loop, gpu)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: MT10 only, one round, few steps (figures are rough)")
    args = ap.parse_args()
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = sections - {"envs", "updates", "loop", "gpu"}
    if unknown:
        raise SystemExit(f"error: --only: unknown section {sorted(unknown)[0]!r}; allowed: "
                         "envs, updates, loop, gpu")
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

    result: dict[str, Any] = {"device": _device_info(device), "versions": _versions(),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                              "quick": args.quick, "rounds": rounds,
                              "methods": {m: label for m, (label, _) in
                                          method_rows(params).items()}}
    mt10 = load_tasks("mt10", 1, TASK_CACHE)
    if "envs" in sections:
        progress("environments")
        policy_agent = paper_agent(params, "mt10_mtsac", mt10.names, device)

        def policy_factory(num_tasks: int):
            import numpy as np

            task_ids = np.arange(num_tasks)
            return lambda obs: policy_agent.act(obs, task_ids, deterministic=False)

        result["envs"] = measure_envs(params.env, TASK_CACHE, rounds=rounds, quick=args.quick,
                                      policy_factory=policy_factory, progress=progress)
    if "updates" in sections:
        progress("updates")
        result["updates"] = measure_updates(params, mt10.names, device, rounds=rounds,
                                            updates=updates, progress=progress)
    if "loop" in sections:
        # --quick: a smoke run of the loop's measurement on MT-SAC (every method's loop runs in
        # the pipeline's tests); the full run measures every method.
        result["loop"] = measure_loop(params, runtime, TASK_CACHE, warmup=2 if args.quick else 10,
                                      measured=loop_steps, progress=progress,
                                      only=("mtsac",) if args.quick else None)
    if "gpu" in sections and cuda:
        progress("runs sharing one GPU")
        result["gpu_sharing"] = measure_sharing(args.params, mt10.names,
                                                runs=(1, 2) if args.quick else (1, 2, 4, 8),
                                                seconds=3.0 if args.quick else 10.0)
    result["targets"] = targets(result)
    result["costs"] = costs(result, Path(args.params))
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    _print_table(result)
    name = "cuda" if cuda else "cpu"
    out = Path(args.out) / f"{name}{'-quick' if args.quick else ''}.json"
    write_json(out, result)
    print(f"\nwritten: {out} ({result['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    run_stage(main)
