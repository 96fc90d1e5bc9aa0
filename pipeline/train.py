"""Stage train@<experiment>-<seed>: train one run, write data/runs/<experiment>-<seed>/.

``--seed`` given several times trains those seeds of the experiment side by side in this
process (a seed group: each seed's outputs, checkpoints and MLflow run exactly as its own stage
makes them; the seeds step in lockstep; their updates run in turn on a CPU and as one captured
CUDA graph on a GPU)."""

from contextlib import ExitStack
from pathlib import Path

from ptsl.cli import ArgumentParser
from ptsl.core.config import check_seed_group
from ptsl.core.errors import ConfigError
from ptsl.ops.machine import check_machine
from ptsl.ops.params import load_params, run_config, stage_group
from ptsl.ops.paths import RESUME, RUNS, TASK_CACHE, run_id, stage_id
from ptsl.ops.stage import run_stage
from ptsl.ops.tracking import start_run


def main() -> None:
    ap = ArgumentParser(description=__doc__)
    ap.add_argument("--exp", required=True,
                    help="experiment name: a key of `experiments` in the params file")
    ap.add_argument("--seed", required=True, type=int, action="append",
                    help="training seed (goals, network init, replay sampling); repeat it to "
                         "train several seeds side by side in this process")
    ap.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    ap.add_argument("--out", default=str(RUNS),
                    help="folder that receives <exp>-<seed>/ (default: %(default)s)")
    args = ap.parse_args()
    params = load_params(args.params)
    seeds = list(dict.fromkeys(args.seed))
    cfgs = [run_config(params, args.exp, seed) for seed in seeds]
    try:
        check_seed_group(cfgs)
    except ConfigError as exc:
        raise ConfigError(f"--seed: {exc}") from None
    # The machine check and the networks load torch: a bad params file is answered before
    # that, in under a second.
    machine = check_machine()
    from ptsl.core.agent.builders import check_buildable
    from ptsl.core.loop import train, train_group, write_outputs
    from ptsl.core.persistence import ResumeCheckpoints
    from ptsl.core.runtime import Runtime

    check_buildable(cfgs[0].experiment)
    runtime = Runtime.from_env()  # the machine's choices: checked before anything starts
    runtime.apply()  # threads and precision, before the run's record says what they are
    group = stage_group(params, args.exp)
    with ExitStack() as runs:
        trackers = [runs.enter_context(start_run(
            "train", run_id(args.exp, cfg.seed), stage=stage_id("train", args.exp, cfg.seed, group),
            tags={"experiment": args.exp, "seed": str(cfg.seed),
                  "method": cfg.experiment.method, "host": machine["host"],
                  **({"seed_group": ",".join(map(str, seeds))} if len(seeds) > 1 else {}),
                  **runtime.describe()})) for cfg in cfgs]
        for cfg, tracker in zip(cfgs, trackers):
            tracker.log_params({**cfg.to_dict(), **cfg.headline()})
        if len(cfgs) == 1:
            results = [train(cfgs[0], scratch_dir=RESUME, task_cache=TASK_CACHE, log=trackers[0],
                             runtime=runtime, keep_checkpoint=True)]
        else:
            results = train_group(cfgs, scratch_dir=RESUME, task_cache=TASK_CACHE, logs=trackers,
                                  runtime=runtime, keep_checkpoint=True)
        for cfg, tracker, result in zip(cfgs, trackers, results):
            out = Path(args.out) / run_id(args.exp, cfg.seed)
            write_outputs(cfg, result, out)
            ResumeCheckpoints(RESUME, cfg).remove()  # only now: a kill above resumes from it
            tracker.log_metrics({"final_success": float(result.curve["success"].iloc[-1]),
                                 "parameter_count": result.parameter_count,
                                 "wall_seconds": result.wall_seconds,
                                 "resumed_from": result.resumed_from}, cfg.train.steps)
            tracker.log_artifact(out / "curve.csv")
            tracker.log_artifact(out / "summary.json")
    for cfg, result in zip(cfgs, results):
        final = result.curve.iloc[-1]
        print(f"{run_id(args.exp, cfg.seed)}: success {final['success']:.3f} at step "
              f"{int(final['step'])}, {result.parameter_count:,} parameters, "
              f"{result.wall_seconds:.0f} s")


if __name__ == "__main__":
    run_stage(main)
