"""Stage evaluate@<experiment>-<seed>: load the final agent through the public API, run
deterministic episodes of every task, write data/eval/<experiment>-<seed>.json."""

import argparse
from pathlib import Path

from ptsl import load_agent
from ptsl.cli import run_stage
from ptsl.config import RunConfig, load_params, reads_pal_dim
from ptsl.envcheck import check_machine
from ptsl.envs import MultiTaskVecEnv, load_tasks
from ptsl.evaluate import evaluate
from ptsl.io import write_json_atomic
from ptsl.paths import EVALS, REQUIREMENTS, RUNS, TASK_CACHE, run_id, stage_id
from ptsl.tracking import start_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--exp", required=True)
    ap.add_argument("--seed", required=True, type=int)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--runs", default=str(RUNS))
    ap.add_argument("--out", default=str(EVALS))
    args = ap.parse_args()
    params = load_params(args.params)
    check_machine(REQUIREMENTS)
    episodes = params.evaluate.episodes
    name = run_id(args.exp, args.seed)
    stage = stage_id("evaluate", args.exp, args.seed, reads_pal_dim(params.experiment(args.exp)))
    agent = load_agent(Path(args.runs) / name / "model.pt")
    cfg = RunConfig.from_dict(agent.meta["config"])
    tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, TASK_CACHE)
    env = MultiTaskVecEnv(tasks, cfg.env, cfg.seed, normalize_reward=False, vector="sync")
    try:
        res = evaluate(agent, env, episodes)
    finally:
        env.close()
    record = {"experiment": args.exp, "seed": args.seed, "method": cfg.experiment.method,
              "benchmark": cfg.experiment.benchmark, "episodes": episodes,
              "success": res.mean_success, "return": res.mean_return,
              "parameter_count": agent.parameter_count(),
              "per_task": {n: float(s) for n, s in zip(tasks.names, res.success)}}
    tracker = start_run("evaluate", name, stage=stage,
                        tags={"experiment": args.exp, "seed": str(args.seed)})
    tracker.log_params({"episodes": episodes, "experiment": args.exp, "seed": args.seed})
    tracker.log_metrics({"success": res.mean_success, "return": res.mean_return,
                         **{f"success/{k}": v for k, v in record["per_task"].items()}}, 0)
    out = Path(args.out) / f"{name}.json"
    write_json_atomic(out, record)
    tracker.log_artifact(out)
    tracker.end()
    print(f"{name}: evaluation success {res.mean_success:.3f} over {episodes} episode(s) per task")


if __name__ == "__main__":
    run_stage(main)
