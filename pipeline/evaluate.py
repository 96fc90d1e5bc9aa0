"""Stage evaluate@<experiment>-<seed>: load the final agent through the public API, run
deterministic episodes of every task, write data/eval/<experiment>-<seed>.json; with
evaluate.videos, also record one episode per task as GIFs under data/videos/<experiment>-<seed>/."""

import argparse
import tempfile
from pathlib import Path

from ptsl import load_agent
from ptsl.cli import run_stage
from ptsl.config import load_params, reads_pal_dim, run_config
from ptsl.envcheck import check_machine
from ptsl.envs import MultiTaskVecEnv, load_tasks
from ptsl.evaluate import evaluate
from ptsl.io import replace_dir, write_json_atomic
from ptsl.paths import EVALS, REQUIREMENTS, RUNS, TASK_CACHE, VIDEOS, run_id, stage_id
from ptsl.tracking import start_run
from ptsl.videos import find_backend, no_backend_message, record_videos, use_backend, \
    write_no_videos


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--exp", required=True,
                    help="experiment name: a key of `experiments` in the params file")
    ap.add_argument("--seed", required=True, type=int, help="seed of the trained run to evaluate")
    ap.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    ap.add_argument("--runs", default=str(RUNS),
                    help="folder holding <exp>-<seed>/model.pt (default: %(default)s)")
    ap.add_argument("--out", default=str(EVALS),
                    help="folder that receives <exp>-<seed>.json (default: %(default)s)")
    ap.add_argument("--videos", default=str(VIDEOS),
                    help="folder that receives <exp>-<seed>/ with the rollout GIFs, or only "
                         "index.json when evaluate.videos is false (default: %(default)s)")
    args = ap.parse_args()
    params = load_params(args.params)
    check_machine(REQUIREMENTS)
    episodes = params.evaluate.episodes
    name = run_id(args.exp, args.seed)
    stage = stage_id("evaluate", args.exp, args.seed, reads_pal_dim(params.experiment(args.exp)))
    # Refused (one line naming the fields) if it was trained under another config than the
    # params file resolves for this run.
    cfg = run_config(params, args.exp, args.seed)
    agent = load_agent(Path(args.runs) / name / "model.pt", expect=cfg)
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
    videos = Path(args.videos) / name
    backend = find_backend() if params.evaluate.videos else None
    videos.parent.mkdir(parents=True, exist_ok=True)
    # The videos are made aside (removed if anything fails) and both outputs are put in place
    # only once everything worked: a failed stage writes nothing.
    with tempfile.TemporaryDirectory(dir=videos.parent, prefix=f".{name}.") as tmp:
        staged = Path(tmp) / name
        if backend is not None:
            use_backend(backend)
            record_videos(agent, tasks, cfg.env, cfg.seed, staged)
        elif params.evaluate.videos:
            print(no_backend_message())
            write_no_videos(staged, "no off-screen OpenGL backend for MuJoCo")
        else:
            write_no_videos(staged, "evaluate.videos is false")
        out = Path(args.out) / f"{name}.json"
        write_json_atomic(out, record)
        replace_dir(staged, videos)
    tracker = start_run("evaluate", name, stage=stage,
                        tags={"experiment": args.exp, "seed": str(args.seed)})
    tracker.log_params({"episodes": episodes, "videos": params.evaluate.videos, **cfg.headline()})
    tracker.log_metrics({"success": res.mean_success, "return": res.mean_return,
                         "parameter_count": agent.parameter_count(),
                         **{f"success/{k}": v for k, v in record["per_task"].items()}}, 0)
    if backend is not None:
        tracker.log_params({"render_backend": backend})
        tracker.log_artifacts(videos, "videos")
    tracker.log_artifact(out)
    tracker.end()
    print(f"{name}: evaluation success {res.mean_success:.3f} over {episodes} episode(s) per task"
          + (f"; videos in {videos} ({backend})" if backend else ""))


if __name__ == "__main__":
    run_stage(main)
