"""Stage check_env: MuJoCo loads, every benchmark the pipeline uses builds and steps.

Versions and the torch device go to reports/environment.json (training stages depend on it:
a new torch or Meta-World re-runs them), the per-benchmark checks to reports/benchmarks.json
(so adding a benchmark does not re-run the others' training), and both to MLflow."""

import argparse
from pathlib import Path

from ptsl.cli import run_stage
from ptsl.config import load_params
from ptsl.envcheck import run_checks
from ptsl.io import write_json_atomic
from ptsl.paths import REPORTS, TASK_CACHE
from ptsl.tracking import start_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    ap.add_argument("--out", default=str(REPORTS),
                    help="folder that receives environment.json and benchmarks.json "
                         "(default: %(default)s)")
    args = ap.parse_args()
    params = load_params(args.params)
    names = params.runs.plain + params.runs.ptsl
    report = run_checks({params.experiments[n].benchmark for n in names}, params.env, TASK_CACHE)
    # Creating the MLflow store here, once, avoids SQLite creation races between later workers.
    tracker = start_run("check_env", "check_env", stage="check_env")
    tracker.log_params({"versions": report["versions"], "torch": report["torch"]})
    env_path, bench_path = Path(args.out) / "environment.json", Path(args.out) / "benchmarks.json"
    write_json_atomic(env_path, {"versions": report["versions"], "torch": report["torch"]})
    write_json_atomic(bench_path, report["benchmarks"])
    tracker.log_artifact(env_path)
    tracker.log_artifact(bench_path)
    tracker.end()
    print(f"environment ok: {', '.join(f'{k} {v}' for k, v in report['versions'].items())}; "
          f"torch device {report['torch']['device']}")


if __name__ == "__main__":
    run_stage(main)
