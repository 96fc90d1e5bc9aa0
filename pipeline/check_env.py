"""Stage check_env: MuJoCo loads, every benchmark the pipeline uses builds and steps.

The machine (host, versions, torch device) goes to reports/environment.json, which is no DVC
output (dvc.lock is the same on every machine), no stage depends on and git does not track, so
a training stage's cache key never holds the machine (training depends on the pins in
requirements/compute.txt, which every stage checks with ptsl.ops.machine.check_machine). The
per-benchmark checks go to reports/benchmarks.json (the stage's output), both to MLflow."""

from pathlib import Path

from ptsl.core.envs import check_benchmark
from ptsl.core.files import write_json
from ptsl.ops.machine import check_machine
from ptsl.ops.params import load_params
from ptsl.ops.paths import REPORTS, TASK_CACHE
from ptsl.ops.stage import run_stage, stage_parser
from ptsl.ops.tracking import start_run


def main() -> None:
    args = stage_parser(__doc__, REPORTS,
                        "folder that receives environment.json and benchmarks.json").parse_args()
    params = load_params(args.params)
    record = check_machine()  # host, versions, torch device
    # The first training seed's tasks: its goal list is the one training draws (and caches), so
    # the check costs no second list (MT50's takes tens of seconds to draw).
    seed = params.seeds[0]
    benchmarks = {b: check_benchmark(b, params.env, seed, TASK_CACHE)
                  for b in sorted({params.experiments[n].benchmark for n in params.trained})}
    env_path, bench_path = Path(args.out) / "environment.json", Path(args.out) / "benchmarks.json"
    write_json(env_path, record)
    write_json(bench_path, benchmarks)
    with start_run("check_env", "check_env", stage="check_env") as tracker:
        tracker.log_params(record)
        tracker.log_artifact(env_path)
        tracker.log_artifact(bench_path)
    print(f"environment ok: {', '.join(f'{k} {v}' for k, v in record['versions'].items())}; "
          f"torch device {record['torch']['device']}")

if __name__ == "__main__":
    run_stage(main)
