"""Stage branches_ptsl@<experiment>-<seed>: a trained PTSL agent's task branches. Loads the final
agent and runs the evaluate stage's episodes (its environment, seeds, goals and episode count)
twice, intact and with every PTSL layer's task branch zeroed; writes
data/branches/<experiment>-<seed>/: branches.csv (every PTSL layer's task branch and shared
path, their outputs on the intact run's observations and their weights) and zeroed.csv (per
task, success and return intact and zeroed). The measurement: src/ptsl/core/branches.py."""

from pathlib import Path

from ptsl.cli import ArgumentParser, whole
from ptsl.core.config import MAX_SEED
from ptsl.core.errors import ConfigError
from ptsl.ops.machine import check_machine
from ptsl.ops.params import load_params, run_config
from ptsl.ops.paths import BRANCHES, RUNS, TASK_CACHE, run_id, stage_id
from ptsl.ops.stage import run_stage
from ptsl.ops.tracking import start_run


def main() -> None:
    ap = ArgumentParser(description=__doc__)
    ap.add_argument("--exp", required=True,
                    help="experiment name: a key of `experiments` in the params file whose "
                         "method has PTSL layers")
    ap.add_argument("--seed", required=True, type=whole(0, MAX_SEED),
                    help="seed of the trained run to measure")
    ap.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    ap.add_argument("--runs", default=str(RUNS),
                    help="folder holding <exp>-<seed>/model.pt (default: %(default)s)")
    ap.add_argument("--out", default=str(BRANCHES),
                    help="folder that receives <exp>-<seed>/ (default: %(default)s)")
    args = ap.parse_args()
    params = load_params(args.params)
    cfg = run_config(params, args.exp, args.seed)
    from ptsl.core.methods import METHODS

    if not METHODS[cfg.experiment.method].ptsl:
        allowed = ", ".join(m.name for m in METHODS.values() if m.ptsl)
        raise ConfigError(f"--exp {args.exp}: its method {cfg.experiment.method!r} has no PTSL "
                          f"layer to measure; allowed: an experiment of method {allowed}")
    # The machine check and the agent load torch: a bad params file is answered before that.
    check_machine()
    from ptsl.core.branch_records import write_branch_records
    from ptsl.core.branches import measure_branches
    from ptsl.core.envs import load_tasks
    from ptsl.core.persistence import load_agent
    from ptsl.core.runtime import Runtime

    name = run_id(args.exp, args.seed)
    episodes = params.evaluate.episodes
    # Refused (one line naming the fields) if it was trained under another config than the
    # params file resolves for this run.
    agent = load_agent(Path(args.runs) / name / "model.pt", expect=cfg)
    tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, TASK_CACHE)
    norms, zeroed = measure_branches(agent, cfg, tasks, episodes,
                                     Runtime.from_env().eval_workers(tasks.num_tasks))
    out = Path(args.out) / name
    write_branch_records(out, norms, zeroed)
    intact, without = zeroed["intact_success"].mean(), zeroed["zeroed_success"].mean()
    with start_run("branches", name, stage=stage_id("branches", args.exp, args.seed, True),
                   tags={"experiment": args.exp, "seed": str(args.seed)}) as tracker:
        tracker.log_params({"episodes": episodes, **cfg.headline()})
        tracker.log_metrics({"success/intact": float(intact), "success/zeroed": float(without),
                             **{f"zeroed/{r.task}": float(r.zeroed_success)
                                for r in zeroed.itertuples()}}, 0)
        tracker.log_artifacts(out, "branches")
    print(f"{name}: evaluation success {intact:.3f} intact, {without:.3f} with every task "
          f"branch zeroed ({episodes} episode(s) per task); records in {out}")


if __name__ == "__main__":
    run_stage(main)
