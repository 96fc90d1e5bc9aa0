"""Stage aggregate: results table (markdown, CSV), success curves (PNG + DVC plot data) and
metrics under reports/, logged to MLflow as artifacts."""

import argparse
from pathlib import Path

from ptsl.cli import run_stage
from ptsl.config import load_params
from ptsl.paths import EVALS, REPORTS, RUNS
from ptsl.report import collect, write_reports
from ptsl.tracking import start_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default=str(REPORTS))
    args = ap.parse_args()
    params = load_params(args.params)
    records = collect(params, RUNS, EVALS)
    paths = write_reports(params, records, Path(args.out))
    tracker = start_run("aggregate", "aggregate", stage="aggregate")
    tracker.log_params({"seeds": list(params.seeds), "steps": params.train.steps})
    for key in ("table_md", "table_csv", "figure", "metrics"):
        tracker.log_artifact(paths[key])
    tracker.end()
    print(paths["table_md"].read_text())


if __name__ == "__main__":
    run_stage(main)
