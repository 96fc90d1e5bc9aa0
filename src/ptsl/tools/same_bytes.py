"""Does a code change keep every run's bytes? Train each row of a params file a few thousand
vector steps with two checkouts' code and compare the outputs file by file.

``python -m ptsl.tools.same_bytes --params studies/mt10-cpu/params.yaml --steps 2000 --before
../old-checkout`` trains every trained row of the params file (seed 1 unless ``--seed``) with the
code of ``--before`` (its ``src/``) and with this checkout's (``--after``, default ``.``), each in
a fresh process on one torch thread, writes ``model.pt``, ``curve.csv`` and ``summary.json`` as
the training stage does, and prints each file's SHA-256 under both codes. Exit status 0 when
every file is equal, 1 otherwise. It is how a change of ``src/ptsl/core`` that must not change a
number is shown to keep a finished study's runs (docs/studies.md), before their stages are
recorded against the new code with ``dvc commit``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..cli import ArgumentParser, run, whole
from ..core.config import MAX_SEED
from ..core.errors import ConfigError

# Run under the other checkout's code: only what every version of the project has (RunConfig,
# train, write_outputs), so the check works against older commits too. The config is resolved
# here, by this checkout's params code, and handed over as the dict a saved agent holds.
_CHILD = """
import json, sys
from pathlib import Path
from ptsl.core.config import RunConfig
from ptsl.core.loop import train, write_outputs
from ptsl.core.runtime import Runtime
from ptsl.ops.paths import TASK_CACHE
config, out = sys.argv[1:3]
cfg = RunConfig.from_dict(json.loads(config))
result = train(cfg, scratch_dir=Path(out) / "scratch", task_cache=TASK_CACHE, progress=False,
               runtime=Runtime(device="cpu", threads=1, vector="sync"))
write_outputs(cfg, result, Path(out) / "run")
"""

FILES = ("model.pt", "curve.csv", "summary.json")


def short_config(params: Any, name: str, seed: int, steps: int) -> Any:
    """Row ``name``'s run config for ``seed``, cut to ``steps`` vector steps (0: as written),
    evaluated at its own interval where ``steps`` is a multiple of it."""
    from ..core.config import TrainConfig
    from ..ops.params import run_config

    cfg = run_config(params, name, seed)
    if not steps:
        return cfg  # the stage's own run: its outputs are the stage's, byte for byte
    every = cfg.train.eval_every if steps % cfg.train.eval_every == 0 else steps
    return cfg.model_copy(update={"train": TrainConfig(
        steps=steps, eval_every=every, checkpoint_every=steps,
        eval_episodes=cfg.train.eval_episodes)})


def train_with(code: Path, cfg: Any, out: Path) -> dict:
    """SHA-256 of each output file of the run ``cfg`` trained by the code under ``code/src``."""
    env = {**os.environ, "PYTHONPATH": str(code.resolve() / "src")}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cfg.to_dict()), str(out)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{cfg.name}-{cfg.seed} with the code of {code}: {tail}")
    return {f: hashlib.sha256((out / "run" / f).read_bytes()).hexdigest() for f in FILES}


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m ptsl.tools.same_bytes", description=__doc__)
    ap.add_argument("--params", required=True, help="the params file whose rows are trained")
    ap.add_argument("--before", required=True, help="checkout whose src/ is the code before")
    ap.add_argument("--after", default=".", help="checkout whose src/ is the code after "
                                                 "(default: this one)")
    ap.add_argument("--steps", type=whole(0), default=2000,
                    help="vector steps per row (default 2000; 0: the params' own budget)")
    ap.add_argument("--seed", type=whole(0, MAX_SEED), action="append", default=[],
                    help="seed (repeatable; default 1)")
    ap.add_argument("--row", action="append", default=[], metavar="EXPERIMENT",
                    help="only this row (repeatable; default every trained row)")
    ap.add_argument("--out", default=None, help="also write the hashes to this JSON file")
    args = ap.parse_args(argv)
    try:
        for flag, path in (("--before", args.before), ("--after", args.after)):
            if not (Path(path) / "src" / "ptsl").is_dir():
                raise ConfigError(f"{flag}: {path} has no src/ptsl; allowed: a checkout of "
                                  "this project")
        from ..ops.params import load_params

        params = load_params(args.params)
        rows = args.row or list(params.trained)
        unknown = [r for r in rows if r not in params.trained]
        if unknown:
            raise ConfigError(f"--row: {unknown[0]!r} is not a trained row of {args.params}; "
                              f"allowed: {', '.join(params.trained)}")
    except (ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    record: dict[str, dict] = {}
    equal = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in rows:
            for seed in args.seed or [1]:
                hashes = {}
                for side, code in (("before", args.before), ("after", args.after)):
                    out = Path(tmp) / side / f"{name}-{seed}"
                    try:
                        hashes[side] = train_with(Path(code), short_config(params, name, seed,
                                                                           args.steps), out)
                    except RuntimeError as exc:
                        print(f"error: {exc}", file=sys.stderr)
                        return 2
                same = hashes["before"] == hashes["after"]
                equal &= same
                record[f"{name}-{seed}"] = {**hashes, "same": same}
                print(f"{name}-{seed}: {'same bytes' if same else 'DIFFERENT'} "
                      + " ".join(f"{f} {hashes['after'][f][:12]}"
                                 + ("" if hashes["before"][f] == hashes["after"][f]
                                    else f" (before {hashes['before'][f][:12]})")
                                 for f in FILES), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"params": args.params, "steps": args.steps,
                                              "runs": record}, indent=2) + "\n")
    print("every file equal" if equal else "some files differ")
    return 0 if equal else 1


if __name__ == "__main__":
    run(main)
