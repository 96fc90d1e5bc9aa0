"""Stage aggregate: the paper's tables (markdown, CSV), curves with confidence bands and per-task
heatmaps per table, DVC plot data (reports/plots/), the headline metric of every table row
(reports/metrics/<experiment>.json), the data behind the tables (reports/data/: the long CSV,
the protocol record, an .npz per table), with report.branches the PTSL runs' task branches
(from the branches_ptsl stages' data/branches/) and, when videos were recorded, the GIFs
(reports/videos/) and a rollout contact sheet per table; all logged to MLflow as artifacts."""

from pathlib import Path

from ptsl.ops.machine import pinned_versions
from ptsl.ops.params import load_params
from ptsl.ops.paths import BRANCHES, COMPUTE_PINS, EVALS, PUBLISHED, REPORTS, RUNS, VIDEOS
from ptsl.ops.study import shared_path, study_runs_file
from ptsl.ops.stage import run_stage, stage_parser
from ptsl.ops.tracking import start_run
from ptsl.report.branches import collect_branches
from ptsl.report.inputs import Published, collect
from ptsl.report.rollouts import collect_videos
from ptsl.report.versus import read_runs


def main() -> None:
    args = stage_parser(__doc__, REPORTS, "folder that receives the reports").parse_args()
    params = load_params(args.params)
    # Every input is read and checked before anything is written; the reports are then built
    # aside and swapped in (see write_reports), so a failure leaves the old reports in place.
    records = collect(params, RUNS, EVALS)
    videos = collect_videos(params, VIDEOS)
    branches = collect_branches(params, BRANCHES) if params.report.branches else None
    # A study reads the project's published numbers and pins, and the runs of another study
    # a table sets its rows beside (tables.<t>.versus).
    published = Published.load(shared_path(PUBLISHED))
    versus_runs = {t.versus.study: read_runs(shared_path(study_runs_file(t.versus.study)))
                   for t in params.tables.values() if t.versus is not None}
    from ptsl.report.tables import write_reports  # the plotting libraries: once inputs are good

    written = write_reports(params, records, published, Path(args.out), videos,
                            pinned_versions(shared_path(COMPUTE_PINS)), branches, versus_runs)
    with start_run("aggregate", "aggregate", stage="aggregate") as tracker:
        tracker.log_params({"budget": params.budget, "seeds": list(params.seeds),
                            "long_seeds": list(params.long_seeds), "steps": params.train.steps,
                            "long_steps": params.train.long_steps,
                            "primary": params.report.primary,
                            "metric": params.report.metric, "protocol": params.protocol})
        for path in written.values():
            if path.is_dir():
                tracker.log_artifacts(path, path.name)
            else:
                tracker.log_artifact(path)
    print(written["results"].read_text())


if __name__ == "__main__":
    run_stage(main)
