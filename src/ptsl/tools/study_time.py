"""How long a study took: its time record from the MLflow store (:mod:`ptsl.ops.study_time`),
printed as a table and written beside the study with its timeline figure
(:mod:`ptsl.report.timeline`).

    python -m ptsl.tools.study_time mt10-cpu    # studies/mt10-cpu/time.json and time.png

The store is the one the stages logged to: ``MLFLOW_TRACKING_URI``, by default the project's
``mlflow.db``. Run it from the project root.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..cli import ArgumentParser, run
from ..ops.params import load_params, stage_group
from ..ops.paths import stage_id
from ..ops.study import study_folder
from ..ops.study_time import render, study_time, write
from ..ops.tracking import tracking_uri
from ..report.timeline import plot_timeline


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m ptsl.tools.study_time", description=__doc__)
    ap.add_argument("name", help="the study (a folder under studies/)")
    ap.add_argument("--out", help="folder for time.json and time.png (default: studies/<name>)")
    args = ap.parse_args(argv)
    root = Path.cwd()
    folder = study_folder(root, args.name)
    params = load_params(folder / "params.yaml")
    expected = [stage_id("train", e, seed, stage_group(params, e))
                for e in params.trained for seed in params.seeds]
    uri = tracking_uri(root)
    record = study_time(args.name, uri, expected).record()
    if not record["train"]:
        print(f"error: {uri}: no training run of study {args.name!r} (MLflow experiment "
              f"{args.name}/train); set MLFLOW_TRACKING_URI to the store its stages logged to",
              file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else folder
    write(record, out / "time.json")
    plot_timeline(record, out / "time.png")
    print(render(record), end="")
    print(f"wrote {out / 'time.json'} and {out / 'time.png'}")
    return 0


if __name__ == "__main__":
    run(main)
