"""The benchmark's printed table: a head, each section's part as soon as it is measured, and the
costs and targets at the end."""

from __future__ import annotations

from typing import Any

from .record import SECTIONS
from .report import REFERENCE_ENV_STEPS_PER_S


def print_head(result: dict[str, Any]) -> None:
    """The machine the figures come from."""
    dev = result["device"]
    print(f"\nptsl benchmark on {dev.get('gpu', dev['cpu'])} ({dev['type']}, "
          f"{dev['threads']} torch thread(s)); figures are medians of interleaved rounds",
          flush=True)


def print_section(name: str, result: dict[str, Any]) -> None:
    """Section ``name``'s figures (what it measured, if it failed part-way) and its status."""
    state = result["sections"].get(name, {})
    figures = result.get(SECTIONS[name])
    if figures is not None:
        PRINTERS[name](figures)
    elif name == "gpu" and state.get("status") == "skipped":
        print(f"\nRuns sharing one GPU: not measured ({state['why']})")
    if state.get("status") in ("failed", "interrupted"):
        print(f"\nSection {name} {state['status']}: {state.get('error', '')}")
    print(end="", flush=True)


def _envs(envs: dict[str, Any]) -> None:
    print("\nEnvironments                                        env steps/s   of raw")
    for name, r in envs.items():
        print(f"  {name:<48} {r['env_steps_per_s']:>10,.0f}   {r['fraction_of_raw']:>5.0%}")


def _updates(up: dict[str, Any]) -> None:
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


def _study(study: dict[str, Any]) -> None:
    print(f"\nStudy {study['study']}, one CPU thread   vector steps/s  loop ms  update ms  "
          "collection ms  floor ms  loop/floor")
    for name, r in study["rows"].items():
        print(f"  {name:<30} {r['vector_steps_per_s']:>14.1f} {r['loop_ms']:>8.1f} "
              f"{r['update_ms']:>10.1f} {r['collection_ms']:>14.1f} {r['floor_ms']:>9.1f} "
              f"{r['loop_over_floor']:>10.2f}")
    print("  floor = collection (act, step, store) + the update's matrix FLOPs at the GEMM rate")


def _loop(loop: dict[str, Any]) -> None:
    print("\nTraining loop end to end, MT10, paper settings   vector steps/s  env steps/s  "
          "x reference")
    for name, r in loop.items():
        print(f"  {name:<46} {r['vector_steps_per_s']:>12.1f} {r['env_steps_per_s']:>12,.0f} "
              f"{r['env_steps_per_s'] / REFERENCE_ENV_STEPS_PER_S:>12.2f}")


def _sharing(sharing: dict[str, Any]) -> None:
    print(f"\nRuns sharing one GPU (MT-SAC, captured update, {sharing['mps_note']})")
    print(f"  {'':<44} aggregate updates/s   per run")
    for n, r in sharing["runs"].items():
        print(f"  {n} run(s){'':<36} {r['aggregate_updates_per_s']:>12,.0f} "
              f"{r['per_run_updates_per_s']:>10,.0f}")


def _node(node: dict[str, Any]) -> None:
    if "rows" not in node:  # a section that failed part-way
        return
    print(f"\nA node's table: {node['runs']} runs at once (one process each, {node['vector']} "
          f"env, {node['mps_note']}), {node['seconds']:.0f} s   vector steps/s")
    for name, r in node["rows"].items():
        each = ", ".join(f"{v:,.1f}" for v in r["vector_steps_per_s_each"])
        print(f"  {name:<34} {r['together']:>9,.1f}   (each: {each})")
    print(f"  all {node['runs']} runs together: {node['vector_steps_per_s']:,.1f} vector "
          f"steps/s; limited by {node['limit']}")


PRINTERS = {"envs": _envs, "updates": _updates, "loop": _loop, "study": _study,
            "gpu": _sharing, "node": _node}


def print_summary(result: dict[str, Any]) -> None:
    """Costs (when the loop was measured) and every target's verdict."""
    c = result.get("costs")
    if c:
        print("\nCost on this machine, one run at a time")
        for name, hours in c["run_200k_mt10_hours"].items():
            print(f"  200k MT10 run, {name:<38} {hours:>8.1f} h")
        print(f"  the paper's grid ({c['grid_training_stages']} training stages)"
              f"{'':<15} {c['grid_hours_one_at_a_time']:>8.0f} h")
        shared = c.get("grid_hours_shared")
        print(f"  the same grid, {c.get('shared_runs', 8)} runs sharing the GPU{'':<18} "
              + (f"{shared:>8.0f} h" if shared is not None
                 else f"not measured (needs 1 and {c.get('shared_runs', 8)} runs sharing a GPU)"))
    print("\nTargets")
    for t in result.get("targets", []):
        value = "—" if t["value"] is None else f"{t['value']:,.2f}"
        print(f"  [{t['status']:^12}] {t['target']}: {value} (goal {t['goal']})")
