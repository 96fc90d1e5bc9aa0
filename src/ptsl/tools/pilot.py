"""A study's pilot: each row trained a few thousand vector steps at the study's own settings, timed,
and the cost of a full run and of the whole study projected from it.

``python -m ptsl.tools.pilot --study mt10-b1280 --steps 2000`` trains every row of
``studies/mt10-b1280/params.yaml`` (seed 1, one torch thread, nothing written to the study) and
prints per row the random-action phase's and the updating phase's vector steps per second, the
projected hours of one run at ``train.steps`` and the study's core-hours; ``--out`` writes the
same as JSON. Rows run one after another in this process: start two (``--row``) to time them as
the study runs them, two at a time on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..core.config import TrainConfig
from ..core.errors import ConfigError
from ..core.files import write_atomic
from ..core.loop import train
from ..core.runtime import Runtime
from ..ops.params import load_params, run_config
from ..ops.paths import TASK_CACHE


def pilot_row(params: Any, name: str, steps: int, seed: int = 1) -> dict[str, Any]:
    """One row trained ``steps`` vector steps (its warm-up as configured), timed by phase."""
    cfg = run_config(params, name, seed)
    init = cfg.sac.init_steps
    if steps <= init:
        raise ConfigError(f"--steps: {steps} leaves no updating step after the warm-up of "
                          f"{init}; allowed: more than {init}")
    full = cfg.train.steps
    cfg = cfg.model_copy(update={"train": TrainConfig(steps=steps, eval_every=steps,
                                                      checkpoint_every=steps, eval_episodes=1)})
    stamps: dict[int, float] = {}

    def on_step(done: int) -> None:
        if done in (1, init, steps):
            stamps[done] = time.perf_counter()

    with tempfile.TemporaryDirectory() as scratch:
        t0 = time.perf_counter()
        result = train(cfg, scratch_dir=Path(scratch), task_cache=TASK_CACHE, progress=False,
                       runtime=Runtime(device="cpu", threads=1), on_step=on_step)
        wall = time.perf_counter() - t0
    random_rate = (init - 1) / (stamps[init] - stamps[1])
    update_rate = (steps - init) / (stamps[steps] - stamps[init])
    # One evaluation at the end of the pilot; the full run evaluates full/eval_every times.
    evals = full // params.train.eval_every
    eval_s = max(0.0, wall - (stamps[steps] - stamps[1]))
    hours = (init / random_rate + (full - init) / update_rate + evals * eval_s) / 3600
    return {"experiment": name, "label": cfg.experiment.label or name,
            "hidden_dim": cfg.experiment.hidden_dim, "batch": cfg.sac.batch_size,
            "parameters": result.parameter_count, "pilot_steps": steps,
            "random_steps_per_s": random_rate, "update_steps_per_s": update_rate,
            "pilot_wall_s": wall, "startup_and_eval_s": eval_s, "run_steps": full,
            "run_hours": hours}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptsl.tools.pilot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", required=True, help="the study's name (a folder under studies/)")
    ap.add_argument("--steps", type=int, default=2000, help="vector steps per row (default 2000)")
    ap.add_argument("--row", action="append", default=[], metavar="EXPERIMENT",
                    help="time only this row (repeatable; default: every trained row)")
    ap.add_argument("--out", default=None, help="write the figures to this JSON file")
    args = ap.parse_args(argv)
    path = Path("studies") / args.study / "params.yaml"
    try:
        if not path.is_file():
            raise ConfigError(f"--study: no {path}; allowed: "
                              + ", ".join(sorted(p.parent.name for p in
                                                 Path("studies").glob("*/params.yaml"))))
        params = load_params(path)
        rows = args.row or list(params.trained)
        unknown = [r for r in rows if r not in params.trained]
        if unknown:
            raise ConfigError(f"--row: {unknown[0]!r} is not a trained row of {path}; allowed: "
                              f"{', '.join(params.trained)}")
        out = []
        for name in rows:
            row = pilot_row(params, name, args.steps)
            out.append(row)
            print(f"{row['label']:<40} random {row['random_steps_per_s']:6.1f}/s  updating "
                  f"{row['update_steps_per_s']:6.2f}/s  one run of {row['run_steps']:,} steps "
                  f"about {row['run_hours']:.2f} h", flush=True)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seeds = len(params.seeds)
    total = sum(r["run_hours"] for r in out) * seeds
    print(f"{len(out)} row(s) x {seeds} seed(s): about {total:.1f} core-hours "
          f"({total / 2:.1f} h of wall time at two runs at once)")
    if args.out:
        write_atomic(Path(args.out), json.dumps({"study": args.study, "rows": out,
                                                 "seeds": seeds, "core_hours": total},
                                                indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
