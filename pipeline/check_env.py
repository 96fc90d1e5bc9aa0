"""Stage check_env: MuJoCo loads, every benchmark the pipeline uses builds and steps.

The machine (host, versions, torch device) goes to reports/environment.json, which is no DVC
output (dvc.lock is the same on every machine), no stage depends on and git does not track, so
a training stage's cache key never holds the machine (training depends on the pins in
requirements.txt, which every stage checks with ptsl.envcheck.check_machine). The per-benchmark
checks go to reports/benchmarks.json (the stage's output), both to MLflow."""

import argparse
from pathlib import Path

from ptsl.cli import run_stage
from ptsl.config import load_params
from ptsl.envcheck import check_machine, run_checks
from ptsl.io import write_json_atomic
from ptsl.paths import REPORTS, REQUIREMENTS, TASK_CACHE
from ptsl.tracking import start_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    ap.add_argument("--out", default=str(REPORTS),
                    help="folder that receives environment.json and benchmarks.json "
                         "(default: %(default)s)")
    args = ap.parse_args()
    params = load_params(args.params)
    machine = check_machine(REQUIREMENTS)
    names = params.runs.plain + params.runs.ptsl
    report = run_checks({params.experiments[n].benchmark for n in names}, params.env, TASK_CACHE)
    tracker = start_run("check_env", "check_env", stage="check_env")
    record = {"host": machine["host"], "versions": report["versions"], "torch": report["torch"]}
    tracker.log_params(record)
    env_path, bench_path = Path(args.out) / "environment.json", Path(args.out) / "benchmarks.json"
    write_json_atomic(env_path, record)
    write_json_atomic(bench_path, report["benchmarks"])
    tracker.log_artifact(env_path)
    tracker.log_artifact(bench_path)
    tracker.end()
    print(f"environment ok: {', '.join(f'{k} {v}' for k, v in report['versions'].items())}; "
          f"torch device {report['torch']['device']}")


if __name__ == "__main__":
    run_stage(main)
