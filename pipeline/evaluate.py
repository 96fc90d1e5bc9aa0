"""Stage evaluate@<experiment>-<seed>: load the final agent, run deterministic episodes of every
task, write data/eval/<experiment>-<seed>.json; with evaluate.videos, also record one episode per
task as GIFs under data/videos/<experiment>-<seed>/ (else only its index.json)."""

from pathlib import Path

from ptsl.ops.machine import check_machine
from ptsl.ops.params import load_params, run_config, stage_group
from ptsl.ops.paths import EVALS, RUNS, TASK_CACHE, VIDEOS, run_id, stage_id
from ptsl.ops.stage import run_stage, stage_parser
from ptsl.ops.tracking import start_run


def main() -> None:
    ap = stage_parser(__doc__, EVALS, "folder that receives <exp>-<seed>.json",
                      "seed of the trained run to evaluate")
    ap.add_argument("--runs", default=str(RUNS),
                    help="folder holding <exp>-<seed>/model.pt (default: %(default)s)")
    ap.add_argument("--videos", default=str(VIDEOS),
                    help="folder that receives <exp>-<seed>/ with the rollout GIFs, or only "
                         "index.json when evaluate.videos is false (default: %(default)s)")
    args = ap.parse_args()
    params = load_params(args.params)
    cfg = run_config(params, args.exp, args.seed)
    # The machine check and the agent load torch: a bad params file is answered before that.
    check_machine()
    from ptsl.core.envs import load_tasks
    from ptsl.core.evaluation import evaluate, evaluator
    from ptsl.core.files import folder_aside
    from ptsl.core.persistence import load_agent
    from ptsl.core.records import Evaluation
    from ptsl.core.rollouts import (find_backend, no_backend_message, record_videos,
                                    use_backend, write_no_videos)
    from ptsl.core.runtime import Runtime

    episodes = params.evaluate.episodes
    name = run_id(args.exp, args.seed)
    stage = stage_id("evaluate", args.exp, args.seed, stage_group(params, args.exp))
    # Refused (one line naming the fields) if it was trained under another config than the
    # params file resolves for this run.
    agent = load_agent(Path(args.runs) / name / "model.pt", expect=cfg)
    tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, TASK_CACHE)
    env = evaluator(tasks, cfg.env, cfg.seed, Runtime.from_env().eval_workers(tasks.num_tasks))
    try:
        res = evaluate(agent, env, episodes)
    finally:
        env.close()
    record = Evaluation(experiment=args.exp, seed=args.seed, method=cfg.experiment.method,
                        benchmark=cfg.experiment.benchmark, episodes=episodes,
                        success=res.mean_success, returns=res.mean_return,
                        parameter_count=agent.parameter_count(),
                        per_task={n: float(s) for n, s in zip(tasks.names, res.success)})
    backend = find_backend() if params.evaluate.videos else None
    videos, out = Path(args.videos) / name, Path(args.out) / f"{name}.json"
    # The videos are made aside and both outputs put in place only once everything worked: a
    # failed stage writes nothing.
    with folder_aside(videos, "rollout videos") as staged:
        if backend is not None:
            use_backend(backend)
            record_videos(agent, tasks, cfg.env, cfg.seed, staged)
        elif params.evaluate.videos:
            print(no_backend_message())
            write_no_videos(staged, "no off-screen OpenGL backend for MuJoCo")
        else:
            write_no_videos(staged, "evaluate.videos is false")
        record.write(out)
    with start_run("evaluate", name, stage=stage,
                   tags={"experiment": args.exp, "seed": str(args.seed)}) as tracker:
        tracker.log_params({"episodes": episodes, "videos": params.evaluate.videos,
                            **cfg.headline()})
        tracker.log_metrics({"success": res.mean_success, "return": res.mean_return,
                             "parameter_count": agent.parameter_count(),
                             **{f"success/{k}": v for k, v in record.per_task.items()}}, 0)
        if backend is not None:
            tracker.log_params({"render_backend": backend})
            tracker.log_artifacts(videos, "videos")
        tracker.log_artifact(out)
    print(f"{name}: evaluation success {res.mean_success:.3f} over {episodes} episode(s) per task"
          + (f"; videos in {videos} ({backend})" if backend else ""))


if __name__ == "__main__":
    run_stage(main)
