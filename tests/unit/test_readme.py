"""The README shows what the pipeline produced: its results block is the summary at the top of
reports/results.md, and the README stays short enough to read in a minute."""

from __future__ import annotations

import re

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
    """At most 150 lines, none over 160 characters outside code blocks and the generated
    contrasts table (a study's block is one line with links: render_study)."""
    from ptsl.report.readme import CONTRASTS

    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    i, j = text.index(CONTRASTS[0]), text.index(CONTRASTS[1])
    prose = re.sub(r"```.*?```", "", text[:i] + text[j:], flags=re.S)
    assert [line for line in prose.splitlines() if len(line) > 160] == []


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
    from ptsl.report.readme import STUDY_BLOCK, render_study

    readme = (ROOT / "README.md").read_text()
    names = [m["name"] for m in STUDY_BLOCK.finditer(readme)]
    assert "mt10-cpu" in names
    for m in STUDY_BLOCK.finditer(readme):
        folder = ROOT / "studies" / m["name"]
        results = folder / "reports" / "results.md"
        if results.is_file():
            assert m[0] == render_study(m["name"], results.read_text(), folder), (
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
    (reports.parent / "time.png").write_bytes(b"")
    out = with_studies(readme, tmp_path)
    # One line: the headline table's title and the links (results, the timeline it has).
    assert (f"{done[0]}\n- `done`: T: [results](studies/done/reports/results.md), "
            f"[timeline](studies/done/time.png).\n{done[1]}") in out
    assert "Protocol" not in out and "| a |" not in out
    assert f"{pending[0]}\n1 of 5 runs\n{pending[1]}" in out
    assert out.startswith("intro\n") and "\nmiddle\n" in out and out.endswith("end\n")


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
    view = contrasts_view(tmp_path)
    assert view.splitlines()[1] == (
        "| contrast (paired by seed) | a (batch 128, v1 reward) | b (batch 128, v1 reward) |")
    assert "| X − Y | +0.050 [-0.100, +0.200], 2 pair(s) (primary) | — |" in view
    assert "| Z − Y | — | -0.200 no interval, 1 pair(s) |" in view
    readme = f"intro\n{CONTRASTS[0]}\nold\n{CONTRASTS[1]}\nend\n"
    assert with_contrasts(readme, tmp_path) == f"intro\n{view}\nend\n"
    # The project's own README shows what its studies report.
    text = (ROOT / "README.md").read_text()
    assert with_contrasts(text, ROOT) == text, "README is stale: run `python -m ptsl.report.readme`"


def test_a_study_block_without_a_headline_table_still_links_its_results(tmp_path):
    from ptsl.report.readme import render_study, study_markers

    (tmp_path / "PREREGISTRATION.md").write_text("x")
    block = render_study("s", f"{SUMMARY_START}\nProtocol: p.\n\nMetric: m.\n{SUMMARY_END}\n",
                         tmp_path)
    start, end = study_markers("s")
    assert block == (f"{start}\n- `s`: its reports: [results](studies/s/reports/results.md), "
                     f"[pre-registration](studies/s/PREREGISTRATION.md).\n{end}")
