"""The README shows what the pipeline produced: its results block is the summary at the top of
reports/results.md, and the README stays short enough to read in a minute."""

from __future__ import annotations

from ptsl.report.markdown import SUMMARY_END, SUMMARY_START
from ptsl.report.readme import embedded, render, render_check

from ..conftest import ROOT


def test_readme_results_block_matches_reports():
    readme = (ROOT / "README.md").read_text()
    results = (ROOT / "reports" / "results.md").read_text()
    assert embedded(readme) == render_check(results), (
        "README is stale: run `python -m ptsl.report.readme`")
    assert "budget `small`: 300 vector steps per task" in embedded(readme)


def test_the_readme_reads_in_a_minute():
    # A study's block (render_study) leaves its protocol and metric lines to its results.md.
    assert len((ROOT / "README.md").read_text().splitlines()) <= 180


def test_render_points_links_into_reports():
    block = render(f"{SUMMARY_START}\n![a](figures/x.png) [s](https://example.org)\n"
                   f"{SUMMARY_END}\n")
    assert "](reports/figures/x.png)" in block and "](https://example.org)" in block
    assert "[reports/results.md](reports/results.md)" in block


def test_the_block_is_the_summary_of_every_benchmark(tmp_path):
    """One line of protocol, one of metric, the headline table of each benchmark (its first in
    params.yaml) naming its published sources, and a link to every table."""
    from ptsl.ops.paths import PUBLISHED
    from ptsl.report.published import Published
    from ptsl.report.tables import write_reports

    from . import report_data

    p = report_data.params(tables=("mt10_200k", "mt10_1m", "mt50_200k", "mt50_1m"))
    write_reports(p, report_data.records(p), Published.load(ROOT / PUBLISHED), tmp_path)
    results = (tmp_path / "results.md").read_text()
    block = render(results)
    lines = block.splitlines()
    assert lines[1].startswith("Protocol: protocol `reference`: Meta-World v3 tasks, v1 reward")
    assert lines[3].startswith("Metric: evaluation success: the deterministic policy")
    titles = [x for x in lines if x.startswith("**")]
    assert titles == ["**MT10, 200k steps (reported at 300 vector steps per task)**",
                      "**MT50, 200k steps (reported at 300 vector steps per task)**"]
    assert block.count("| evaluation IQM final [95% CI] | evaluation mean final [95% CI] "
                       "± std |") == 2
    assert block.count("[1] PTSL paper, results figure: training success, mean over seeds") == 2
    assert "](reports/figures/mt10_200k_curves.png)" in block
    assert lines[-2].endswith("[reports/results.md](reports/results.md).")
    # The full tables stay in results.md, below the summary.
    assert results.count("#### ") == 4 and "#### " not in block


def test_study_blocks_match_their_reports_once_they_have_them():
    """Each study block of the README is its study's summary where the study has reports, and
    is left as written (a status line) where it has none yet."""
    from ptsl.report.readme import STUDY_BLOCK, render_study, study_time_record

    readme = (ROOT / "README.md").read_text()
    names = [m["name"] for m in STUDY_BLOCK.finditer(readme)]
    assert "mt10-cpu" in names
    for m in STUDY_BLOCK.finditer(readme):
        folder = ROOT / "studies" / m["name"]
        results = folder / "reports" / "results.md"
        if results.is_file():
            assert m[0] == render_study(m["name"], results.read_text(), study_time_record(folder),
                                        (folder / "time.png").is_file()), (
                "README is stale: run `python -m ptsl.report.readme`")


def test_a_study_block_is_rendered_from_its_reports_and_a_pending_one_kept(tmp_path):
    from ptsl.report.readme import study_markers, with_studies

    done, pending = study_markers("done"), study_markers("pending")
    readme = (f"intro\n{done[0]}\nrunning\n{done[1]}\nmiddle\n{pending[0]}\n1 of 5 runs\n"
              f"{pending[1]}\nend\n")
    reports = tmp_path / "studies" / "done" / "reports"
    reports.mkdir(parents=True)
    (reports / "results.md").write_text(
        f"{SUMMARY_START}\nProtocol: p.\n\nMetric: m.\n\n**T**\n\n| a |\n\n![c](figures/t.png)\n"
        f"{SUMMARY_END}\n")
    out = with_studies(readme, tmp_path)
    # The protocol and metric stay in results.md, which the title links.
    assert f"{done[0]}\nStudy `done`: **T** (protocol, metric and every table: " \
           "[studies/done/reports/results.md](studies/done/reports/results.md))\n\n| a |\n\n" \
           f"![c](studies/done/reports/figures/t.png)\n{done[1]}" in out
    assert "Protocol" not in out and "Metric" not in out
    assert f"{pending[0]}\n1 of 5 runs\n{pending[1]}" in out
    assert out.startswith("intro\n") and "\nmiddle\n" in out and out.endswith("end\n")


def test_a_study_block_says_how_long_the_study_took(tmp_path):
    """With the study's time record (python -m ptsl.tools.study_time) the block ends with one line
    of training time in all and per run, wall time and runs at once."""
    import json

    from ptsl.report.readme import study_markers, with_studies

    done = study_markers("done")
    folder = tmp_path / "studies" / "done"
    (folder / "reports").mkdir(parents=True)
    (folder / "reports" / "results.md").write_text(f"{SUMMARY_START}\n**T**\n{SUMMARY_END}\n")
    runs = [{"stage": f"train@a-{i}", "finished": True, "seconds": s}
            for i, s in enumerate((1200.0, 3000.0, 2400.0))]
    record = {"train": runs + [{"stage": "train@a-9", "finished": False, "seconds": 60.0}],
              "training_runs_not_in_store": ["train@b-1"], "training_seconds": 6660.0,
              "wall_seconds": 9000.0, "most_training_runs_at_once": 2, "threads_per_run": ["1"]}
    (folder / "time.json").write_text(json.dumps(record))
    (folder / "time.png").write_bytes(b"")
    out = with_studies(f"{done[0]}\nrunning\n{done[1]}\n", tmp_path)
    assert out.endswith(
        "\n\nHow long it took ([time.json](studies/done/time.json), [timeline]"
        "(studies/done/time.png), from the MLflow store): 3 "
        "training runs, 1.9 h of training (20 to 50 min per run, median 40; killed attempts "
        "and the steps a resume repeats included), 2.5 h of wall time from the first start to "
        "the last end, pauses included, at most 2 runs at once with 1 torch thread(s) each; 1 "
        f"more run(s) logged to another store.\n{done[1]}\n")


def test_the_contrasts_block_sets_each_studys_contrasts_side_by_side(tmp_path):
    """A line per contrast, a column per study that reports contrasts (with its batch); a study
    without the contrast shows a dash; the README's block is what the studies' reports say."""
    import shutil

    from ptsl.report.readme import CONTRASTS, contrasts_view, with_contrasts

    head = ("row,minus,label,minus_label,primary,seed,difference,difference_learned_tasks,mean,"
            "ci_low,ci_high,mean_learned_tasks,ci_low_learned_tasks,ci_high_learned_tasks,"
            "published_difference\n")
    for name, lines in (("a", ["x,y,X,Y,True,1,0.1,0.1,0.05,-0.1,0.2,0.05,-0.1,0.2,",
                               "x,y,X,Y,True,2,0.0,0.0,0.05,-0.1,0.2,0.05,-0.1,0.2,"]),
                        ("b", ["z,y,Z,Y,False,1,-0.2,-0.2,-0.2,,,-0.2,,,"])):
        folder = tmp_path / "studies" / name
        (folder / "reports" / "tables").mkdir(parents=True)
        shutil.copy(ROOT / "studies" / "mt10-cpu" / "params.yaml", folder / "params.yaml")
        (folder / "reports" / "tables" / "t_contrasts.csv").write_text(head + "\n".join(lines))
    (tmp_path / "studies" / "a" / "reports" / "figures").mkdir()
    (tmp_path / "studies" / "a" / "reports" / "figures" / "t_contrasts.png").write_bytes(b"")
    view = contrasts_view(tmp_path)
    assert view.splitlines()[1] == (
        "| contrast (paired by seed) | a (batch 128; "
        "[figure](studies/a/reports/figures/t_contrasts.png)) | b (batch 128) |")
    assert "| X − Y | +0.050 [-0.100, +0.200], 2 pair(s) (primary) | — |" in view
    assert "| Z − Y | — | -0.200 no interval, 1 pair(s) |" in view
    readme = f"intro\n{CONTRASTS[0]}\nold\n{CONTRASTS[1]}\nend\n"
    assert with_contrasts(readme, tmp_path) == f"intro\n{view}\nend\n"
    # The project's own README shows what its studies report.
    text = (ROOT / "README.md").read_text()
    assert with_contrasts(text, ROOT) == text, "README is stale: run `python -m ptsl.report.readme`"


def test_a_study_block_without_a_headline_table_still_links_its_results():
    from ptsl.report.readme import render_study, study_markers

    block = render_study("s", f"{SUMMARY_START}\nProtocol: p.\n\nMetric: m.\n{SUMMARY_END}\n")
    start, end = study_markers("s")
    assert block == (f"{start}\nStudy `s`: protocol, metric and every table: "
                     f"[studies/s/reports/results.md](studies/s/reports/results.md).\n{end}")
