"""The benchmark's verdicts and costs: targets met or not, and what a 200k MT10 run and the
paper's whole grid cost on the measured machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ...ops.params import apply_preset, parse_params
from .steps import CONTACT_TASKS

#: The reference code's own log: about 556 environment steps per second for one MT10 run.
REFERENCE_ENV_STEPS_PER_S = 556.0
#: Runs placed on one GPU for the shared cost line (as `python -m ptsl.ops.grid --mps` would).
SHARED_RUNS = 8


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the speed work with the measured value and whether it holds."""
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, goal: str, ok: bool | None) -> None:
        out.append({"target": what, "value": value, "goal": goal,
                    "status": "not measured" if ok is None else ("met" if ok else "missed")})

    updates = result.get("updates", {})
    rows, ratios = updates.get("rows", {}), updates.get("ratios", {})
    labels = result["methods"]  # method -> its row label
    mtsac = rows.get(f"{labels['mtsac']} | eager")
    on_cpu = result["device"]["type"] == "cpu"
    captured = rows.get(f"{labels['mtsac']} | captured")
    add("GPU: MT-SAC update at paper size, captured (ms)",
        None if captured is None else captured["ms_per_update"], "<= 2.0",
        None if captured is None else captured["ms_per_update"] <= 2.0)
    # The path the training loop takes: captured on CUDA, eager on CPU.
    ratio = ratios.get("MT-SAC captured over Stable-Baselines3",
                       ratios.get("MT-SAC eager over Stable-Baselines3"))
    add("MT-SAC update vs Stable-Baselines3 (speed-up)", ratio, ">= 1.1x",
        None if ratio is None else ratio >= 1.1)
    if mtsac:
        add("MT-SAC update time over its GEMM floor", mtsac["time_over_floor"],
            "<= 1.10" if on_cpu else "(CPU target)",
            mtsac["time_over_floor"] <= 1.10 if on_cpu else None)
        worst = max((v, k.split(":")[0]) for k, v in ratios.items()
                    if "time over MT-SAC's" in k)
        add(f"slowest method's update over MT-SAC's ({worst[1]})", worst[0], "<= 1.5x",
            worst[0] <= 1.5)
    envs = result.get("envs") or {}
    collect = envs.get("rates", {}).get("MT10 collection, sync, policy in the loop")
    if collect:
        add("collection with the policy in the loop, fraction of the raw step rate",
            collect["fraction_of_raw"], ">= 0.80", collect["fraction_of_raw"] >= 0.80)
    steps = envs.get("steps")
    if steps:
        mean = steps["mt10_mean"]
        add("MT10 mean step, fast over stock (speed-up)", mean["stock_over_fast"], ">= 1.4x",
            mean["stock_over_fast"] >= 1.4)
        add("MT10 mean step, fast over MuJoCo's own work", mean["fast_over_mujoco"], "<= 1.6x",
            mean["fast_over_mujoco"] <= 1.6)
        contact = [steps["tasks"][t]["stock_over_fast"] for t in CONTACT_TASKS
                   if t in steps["tasks"]]
        if contact:
            add(f"{' and '.join(CONTACT_TASKS)} step, fast over stock (the smaller)",
                min(contact), ">= 2.5x", min(contact) >= 2.5)
    loop = result.get("loop", {})
    for label, goal in ((labels["mtsac"], 3000.0), (labels["care_ptsl"], 2000.0)):
        value = loop.get(label, {}).get("env_steps_per_s")
        add(f"GPU: {label} end to end, environment steps/s", None if on_cpu else value,
            f">= {goal:,.0f}", None if on_cpu or value is None else value >= goal)
    sharing = result.get("gpu_sharing")
    eight = sharing["runs"].get("8", {}).get("aggregate_updates_per_s") if sharing else None
    add("GPU: aggregate updates/s of 8 runs sharing one GPU", eight, ">= 1,500",
        None if eight is None else eight >= 1500)
    # A node's MT10 table (the five rows, 3 seeds each): on a GPU node only.
    node = result.get("node")
    rate = None if on_cpu or not node else node.get("vector_steps_per_s")
    add("GPU: a node's MT10 table, five rows at once, vector steps/s", rate, ">= 1,800",
        None if rate is None else rate >= 1800)
    return out


def costs(result: dict[str, Any], params_path: Path) -> dict[str, Any]:
    """Hours of one 200k MT10 run per method and of the paper's whole grid, run one stage at a
    time on the measured machine, from the end-to-end rates.

    MT50 stages are estimated from the MT10 loop's rate plus 40 more environment steps per vector
    step at the measured MT50 vector-env rate (nothing of MT50 overlaps in this estimate).
    """
    loop = result.get("loop") or {}
    if not loop:
        return {}
    raw = yaml.safe_load(Path(params_path).read_text())
    paper = parse_params(apply_preset(raw, raw["budgets"]["paper"], "budgets.paper"))
    env = (result.get("envs") or {}).get("rates", {})
    mt50 = env.get("MT50 vector env, sync", {}).get("env_steps_per_s")
    seconds_per_vector_step: dict[tuple[str, str], float] = {}
    labels = result["methods"]  # method -> its row label
    for method, label in labels.items():
        if label not in loop:
            continue
        mt10_s = 1.0 / loop[label]["vector_steps_per_s"]
        seconds_per_vector_step[("mt10", method)] = mt10_s
        if mt50:
            seconds_per_vector_step[("mt50", method)] = mt10_s + 40.0 / mt50
    run_200k = {label: 200_000 * seconds_per_vector_step[("mt10", m)] / 3600.0
                for m, label in labels.items() if ("mt10", m) in seconds_per_vector_step}
    grid_s, stages, missing = 0.0, 0, set()
    for name in paper.trained:
        exp = paper.experiments[name]
        key = (exp.benchmark, exp.method)
        if key not in seconds_per_vector_step:
            missing.add(f"{exp.benchmark}/{exp.method}")
            continue
        for seed in paper.seeds:
            steps = paper.train.long_steps if exp.long and seed in paper.long_seeds \
                else paper.train.steps
            grid_s += steps * seconds_per_vector_step[key]
            stages += 1
    out = {"run_200k_mt10_hours": run_200k, "grid_hours_one_at_a_time": grid_s / 3600.0,
           "grid_training_stages": stages, "grid_not_estimated": sorted(missing),
           "grid_hours_shared": None, "shared_runs": SHARED_RUNS}
    sharing = (result.get("gpu_sharing") or {}).get("runs", {})
    if str(SHARED_RUNS) in sharing and "1" in sharing:
        # Runs sharing the GPU each go at their share of the measured aggregate update rate
        # (at most one run's own speed): an estimate that assumes the node's cores keep every
        # run's environments stepping.
        speedup = sharing[str(SHARED_RUNS)]["aggregate_updates_per_s"] / \
            sharing["1"]["aggregate_updates_per_s"]
        out["grid_hours_shared"] = grid_s / 3600.0 / min(float(SHARED_RUNS), speedup)
    return out
