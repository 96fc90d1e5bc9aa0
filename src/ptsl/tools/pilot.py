"""A study's pilot: each row trained a few thousand vector steps at the study's own settings, timed,
and the cost of a full run and of the whole study projected from it.

``python -m ptsl.tools.pilot --study mt10-b1280 --steps 2000`` trains every row of
``studies/mt10-b1280/params.yaml`` (seed 1, one torch thread, nothing written to the study) and
prints per row the random-action phase's and the updating phase's vector steps per second, the
projected hours of one run at ``train.steps`` and the study's core-hours; ``--out`` writes the
same as JSON. Rows run one after another in this process: start two (``--row``) to time them as
the study runs them, two at a time on two cores.

A learning pilot is the same with more steps, other seeds and a changed setting:
``--steps 30000 --seed 1 --seed 2 --set env.observation=v1 --curves DIR`` trains each row and
seed 30,000 steps with that value (evaluating at the study's own interval) and writes each run's
``curve.csv`` to ``DIR/<experiment>-<seed>.csv``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..cli import ArgumentParser, run, whole
from ..core.config import MAX_SEED, TrainConfig
from ..core.errors import ConfigError
from ..core.files import write_atomic
from ..core.loop import train
from ..core.runtime import Runtime
from ..ops.params import parse_params, read_yaml, run_config
from ..ops.paths import TASK_CACHE


def with_settings(raw: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """The params mapping with each ``KEY=VALUE`` of ``settings`` set (dotted keys, YAML
    values: ``env.observation=v1``, ``sac.batch_size=256``)."""
    import copy

    import yaml

    raw = copy.deepcopy(raw)
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set: expected KEY=VALUE, got {item!r}")
        *parents, last = key.split(".")
        node = raw
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                raise ConfigError(f"--set: {key}: no mapping {part!r} in the params file")
        node[last] = yaml.safe_load(value)
    return raw


def pilot_row(params: Any, name: str, steps: int, seed: int = 1) -> tuple[dict[str, Any], Any]:
    """One row trained ``steps`` vector steps (its warm-up as configured), timed by phase;
    returns the figures and the run's curve."""
    cfg = run_config(params, name, seed)
    init = cfg.sac.init_steps
    if steps <= init:
        raise ConfigError(f"--steps: {steps} leaves no updating step after the warm-up of "
                          f"{init}; allowed: more than {init}")
    full = cfg.train.steps
    every = cfg.train.eval_every if steps % cfg.train.eval_every == 0 else steps
    cfg = cfg.model_copy(update={"train": TrainConfig(steps=steps, eval_every=every,
                                                      checkpoint_every=steps,
                                                      eval_episodes=cfg.train.eval_episodes)})
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
    # The pilot's evaluations against the full run's (full/eval_every of them); the loop's
    # stamps leave out the start-up, so the rest is start-up plus evaluations.
    evals = full // params.train.eval_every
    eval_s = max(0.0, wall - (stamps[steps] - stamps[1])) / (steps // every)
    hours = (init / random_rate + (full - init) / update_rate + evals * eval_s) / 3600
    return {"experiment": name, "seed": seed, "label": cfg.experiment.label or name,
            "hidden_dim": cfg.experiment.hidden_dim, "batch": cfg.sac.batch_size,
            "parameters": result.parameter_count, "pilot_steps": steps,
            "random_steps_per_s": random_rate, "update_steps_per_s": update_rate,
            "pilot_wall_s": wall, "startup_and_eval_s": eval_s, "run_steps": full,
            "run_hours": hours}, result.curve


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m ptsl.tools.pilot", description=__doc__)
    ap.add_argument("--study", required=True, help="the study's name (a folder under studies/)")
    ap.add_argument("--steps", type=whole(1), default=2000,
                    help="vector steps per row (default 2000)")
    ap.add_argument("--row", action="append", default=[], metavar="EXPERIMENT",
                    help="time only this row (repeatable; default: every trained row)")
    ap.add_argument("--seed", type=whole(0, MAX_SEED), action="append", default=[],
                    help="seed (repeatable; default 1)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="train with this params value instead (repeatable): env.observation=v1")
    ap.add_argument("--curves", default=None, metavar="DIR",
                    help="write each run's curve.csv to DIR/<experiment>-<seed>.csv")
    ap.add_argument("--out", default=None, help="write the figures to this JSON file")
    args = ap.parse_args(argv)
    path = Path("studies") / args.study / "params.yaml"
    try:
        if not path.is_file():
            raise ConfigError(f"--study: no {path}; allowed: "
                              + ", ".join(sorted(p.parent.name for p in
                                                 Path("studies").glob("*/params.yaml"))))
        params = parse_params(with_settings(read_yaml(path), args.set))
        rows = args.row or list(params.trained)
        unknown = [r for r in rows if r not in params.trained]
        if unknown:
            raise ConfigError(f"--row: {unknown[0]!r} is not a trained row of {path}; allowed: "
                              f"{', '.join(params.trained)}")
        out = []
        for name in rows:
            for seed in args.seed or [1]:
                row, curve = pilot_row(params, name, args.steps, seed)
                out.append(row)
                if args.curves:
                    write_atomic(Path(args.curves) / f"{name}-{seed}.csv",
                                 curve.to_csv(index=False))
                print(f"{row['label']:<40} seed {seed}  random {row['random_steps_per_s']:6.1f}/s"
                      f"  updating {row['update_steps_per_s']:6.2f}/s  one run of "
                      f"{row['run_steps']:,} steps about {row['run_hours']:.2f} h", flush=True)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seeds = len(params.seeds)
    per_row: dict[str, list[float]] = {}
    for r in out:
        per_row.setdefault(r["experiment"], []).append(r["run_hours"])
    total = sum(sum(h) / len(h) for h in per_row.values()) * seeds
    print(f"{len(out)} row(s) x {seeds} seed(s): about {total:.1f} core-hours "
          f"({total / 2:.1f} h of wall time at two runs at once)")
    if args.out:
        write_atomic(Path(args.out), json.dumps({"study": args.study, "settings": args.set,
                                                 "rows": out, "seeds": seeds,
                                                 "core_hours": total},
                                                indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
