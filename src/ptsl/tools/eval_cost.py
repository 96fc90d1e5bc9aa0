"""What evaluation costs under the ``metaworld-plus`` preset on MT10, before and after
evaluation followed Meta-World+'s: ``python -m ptsl.tools.eval_cost`` (docs/speed.md).

Before: every task's 50 episodes at full length (500 steps) in lock-step, in one process, every
10,000 steps per task (the paper budget's ``eval_every``). After: each episode ends at success,
each task on its own, the tasks over one worker process per core, every 20,000 steps per task
(``eval_stride: 2``). Both are timed on a few episodes per task with an untrained MT-SAC 400x3
(no episode succeeds, so every one runs its full length) and scaled to 50; Meta-World's scripted
policies, which succeed, show what ending at success saves for a policy that has learned.
Timings on one torch thread; a machine's own figures, not a test.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from ..cli import ArgumentParser, run, whole
from ..core.agent.builders import Shapes, build_agent
from ..core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ..core.envs import load_tasks
from ..core.eval_tasks import TaskEvaluator
from ..core.evaluation import evaluate, evaluator

#: The metaworld-plus preset's environment, with and without ending episodes at success.
PLUS = EnvConfig(episode_length=500, goals="resample", reward_version="v2",
                 normalize_reward=False)
EPISODES = 50          # the preset's evaluation episodes per task
BEFORE_EVERY = 10_000  # the paper budget's eval_every
AFTER_EVERY = 20_000   # with the preset's eval_stride 2: Meta-World+'s cadence


def timed_evaluation(agent, tasks, env_cfg: EnvConfig, episodes: int, workers: int) -> float:
    """Seconds of one evaluation of ``episodes`` per task (environments built beforehand)."""
    ev = evaluator(tasks, env_cfg, 1, workers)
    try:
        evaluate(agent, ev, 1)  # builds the environments (or starts the workers)
        t0 = time.perf_counter()
        evaluate(agent, ev, episodes)
        return time.perf_counter() - t0
    finally:
        ev.close()


def scripted_steps(tasks, episodes: int) -> tuple[int, int]:
    """Steps Meta-World's scripted policies (they succeed) take with episodes ending at
    success, and the full count."""
    from metaworld.policies import ENV_POLICY_MAP

    policies = [ENV_POLICY_MAP[name]() for name in tasks.names]
    env_cfg = PLUS.model_copy(update={"eval_ends_at_success": True})
    ev = TaskEvaluator(tasks, env_cfg, 1)
    try:
        ev.evaluate(lambda obs, ids: np.stack([policies[i].get_action(o)
                                               for o, i in zip(obs, ids)]), episodes)
        return ev.envs.steps, episodes * env_cfg.episode_length * tasks.num_tasks
    finally:
        ev.close()


def main() -> None:
    ap = ArgumentParser(prog="python -m ptsl.tools.eval_cost", description=__doc__)
    ap.add_argument("--episodes", type=whole(1), default=2,
                    help="episodes per task timed, scaled to 50 (default: %(default)s)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tasks = load_tasks("mt10", 1, None)
    cfg = RunConfig(name="cost", seed=1,
                    experiment=ExperimentConfig(benchmark="mt10", method="mtsac"), env=PLUS,
                    sac=SACConfig(), train=TrainConfig(steps=10, eval_every=10,
                                                       checkpoint_every=10))
    agent = build_agent(cfg, Shapes(39, 4, tasks.num_tasks), tasks.names)
    cores = len(os.sched_getaffinity(0))
    scale = EPISODES / args.episodes
    plus = PLUS.model_copy(update={"eval_ends_at_success": True})
    before, after_one, after = (timed_evaluation(agent, tasks, env, args.episodes, w) * scale
                                for env, w in ((PLUS, 1), (plus, 1), (plus, cores)))
    used, full = scripted_steps(tasks, args.episodes)
    per = 10_000
    print(f"MT10, metaworld-plus, {EPISODES} episodes of 500 steps per task per evaluation "
          f"(timed on {args.episodes}, scaled); untrained MT-SAC 400x3; {cores} core(s)")
    print(f"  before: lock-step, full episodes, every {BEFORE_EVERY:,}: {before:.0f} s per "
          f"evaluation, {before * per / BEFORE_EVERY:.0f} s per 10k steps")
    print(f"  after, one process: {after_one:.0f} s per evaluation, "
          f"{after_one * per / AFTER_EVERY:.0f} s per 10k steps")
    print(f"  after, {cores} process(es): {after:.0f} s per evaluation, "
          f"{after * per / AFTER_EVERY:.0f} s per 10k steps")
    print(f"  scripted policies, ending at success: {used:,} of {full:,} steps "
          f"({used / full:.0%})")


if __name__ == "__main__":
    run(main)
