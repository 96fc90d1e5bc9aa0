"""Stage train@<experiment>-<seed>: train one run, write data/runs/<experiment>-<seed>/."""

from pathlib import Path

from ptsl.ops.machine import check_machine
from ptsl.ops.params import load_params, run_config, stage_group
from ptsl.ops.paths import RESUME, RUNS, TASK_CACHE, run_id, stage_id
from ptsl.ops.stage import run_stage, stage_parser
from ptsl.ops.tracking import start_run


def main() -> None:
    args = stage_parser(__doc__, RUNS, "folder that receives <exp>-<seed>/",
                        "training seed (goals, network init, replay sampling)").parse_args()
    params = load_params(args.params)
    cfg = run_config(params, args.exp, args.seed)
    # The machine check and the networks load torch: a bad params file is answered before
    # that, in under a second.
    machine = check_machine()
    from ptsl.core.agent.builders import check_buildable
    from ptsl.core.loop import train, write_outputs
    from ptsl.core.persistence import ResumeCheckpoints
    from ptsl.core.runtime import Runtime

    check_buildable(cfg.experiment)
    runtime = Runtime.from_env()  # the machine's choices: checked before anything starts
    runtime.apply()  # threads and precision, before the run's record says what they are
    name = run_id(args.exp, cfg.seed)
    stage = stage_id("train", args.exp, cfg.seed, stage_group(params, args.exp))
    with start_run("train", name, stage=stage,
                   tags={"experiment": args.exp, "seed": str(cfg.seed),
                         "method": cfg.experiment.method, "host": machine["host"],
                         **runtime.describe()}) as tracker:
        tracker.log_params({**cfg.to_dict(), **cfg.headline()})
        result = train(cfg, scratch_dir=RESUME, task_cache=TASK_CACHE, log=tracker,
                       runtime=runtime, keep_checkpoint=True)
        out = Path(args.out) / name
        write_outputs(cfg, result, out)
        ResumeCheckpoints(RESUME, cfg).remove()  # only now: a kill above resumes from it
        tracker.log_metrics({"final_success": float(result.curve["success"].iloc[-1]),
                             "parameter_count": result.parameter_count,
                             "wall_seconds": result.wall_seconds,
                             "resumed_from": result.resumed_from}, cfg.train.steps)
        tracker.log_artifact(out / "curve.csv")
        tracker.log_artifact(out / "summary.json")
    final = result.curve.iloc[-1]
    print(f"{name}: success {final['success']:.3f} at step {int(final['step'])}, "
          f"{result.parameter_count:,} parameters, {result.wall_seconds:.0f} s")

if __name__ == "__main__":
    run_stage(main)
