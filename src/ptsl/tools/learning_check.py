"""Learning check: MT-SAC on the single task reach-v3 must reach >= 80% evaluation success,
averaged over its last three evaluations, within 100,000 environment steps on CPU.

Run with ``make learning-check`` (or ``python -m ptsl.tools.learning_check``). Networks and batch are
smaller than the paper's so that it finishes in minutes on two cores: 3 hidden layers of 128,
batch 128; everything else is the default protocol (v1 reward, reward normalisation, 150-step
episodes, fixed goal, 1500 random steps then one update per step).
"""

from __future__ import annotations

from pathlib import Path

from ..cli import ArgumentParser, run, whole
from ..core.config import (MAX_SEED, EnvConfig, ExperimentConfig, RunConfig, SACConfig,
                           TrainConfig)
from ..core.files import write_atomic
from ..core.loop import train
from ..ops.paths import TASK_CACHE

THRESHOLD = 0.8


def learning_check_config(steps: int = 100_000, seed: int = 1) -> RunConfig:
    """The run the check trains (documented in the README)."""
    return RunConfig(
        name="learning_check_reach", seed=seed,
        experiment=ExperimentConfig(benchmark="reach-v3", method="mtsac", hidden_dim=128,
                                    num_layers=3, name="learning_check_reach"),
        env=EnvConfig(),
        sac=SACConfig(batch_size=128),
        train=TrainConfig(steps=steps, eval_every=5000, checkpoint_every=steps, eval_episodes=1),
    )


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m ptsl.tools.learning_check", description=__doc__)
    ap.add_argument("--steps", type=whole(1), default=100_000,
                    help="vector steps to train (default: %(default)s)")
    ap.add_argument("--seed", type=whole(0, MAX_SEED), default=1, help="run seed (default: 1)")
    ap.add_argument("--out", default="reports/learning_check.csv",
                    help="the evaluation curve's CSV (default: %(default)s)")
    args = ap.parse_args(argv)
    cfg = learning_check_config(args.steps, args.seed)

    def show(row: dict) -> None:
        print(f"step {int(row['step']):>7,}  success {row['success']:.2f}  "
              f"return {row['return']:.1f}", flush=True)

    result = train(cfg, task_cache=TASK_CACHE, progress=False, on_eval=show)
    curve = result.curve
    write_atomic(Path(args.out), curve[["step", "success", "return"]].to_csv(index=False))
    last3 = float(curve["success"].tail(3).mean())
    verdict = "PASS" if last3 >= THRESHOLD else "FAIL"
    print(f"{verdict}: mean success over the last three evaluations = {last3:.2f} "
          f"(threshold {THRESHOLD}); {result.wall_seconds / 60:.1f} min; curve in {args.out}")
    return 0 if last3 >= THRESHOLD else 1


if __name__ == "__main__":
    run(main)
