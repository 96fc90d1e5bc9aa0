"""The README shows what the pipeline produced: its results block is reports/results.md."""

from __future__ import annotations

from ptsl.report.readme import embedded, render

from ..conftest import ROOT


def test_readme_results_block_matches_reports():
    readme = (ROOT / "README.md").read_text()
    results = (ROOT / "reports" / "results.md").read_text()
    assert embedded(readme) == render(results), "README is stale: run `python -m ptsl.report.readme`"


def test_render_points_links_into_reports():
    block = render("![a](figures/x.png) [s](https://example.org)")
    assert "](reports/figures/x.png)" in block and "](https://example.org)" in block


def test_the_block_names_the_metric_and_protocol_of_every_number(tmp_path):
    """Every table of the block says which protocol it ran under and which metric each column
    holds, and where its published values come from."""
    from ptsl.ops.paths import PUBLISHED
    from ptsl.report.published import Published
    from ptsl.report.tables import write_reports

    from . import report_data

    p = report_data.params()
    write_reports(p, report_data.records(p), Published.load(ROOT / PUBLISHED), tmp_path)
    block = render((tmp_path / "results.md").read_text())
    head, *tables = block.split("\n#### ")
    assert "protocol `reference`: Meta-World v3 tasks, v1 reward functions" in head
    assert "evaluation success: the deterministic policy" in head
    assert "training success: the training episodes under the stochastic policy" in head
    assert len(tables) == 2
    for section in tables:
        assert "(reported at " in section.splitlines()[0]
        assert "; protocol `reference`: " in section
        assert ("| evaluation IQM final [95% CI] | published | training IQM final [95% CI] |"
                in section)
        assert "Published values beside ours are those measured at" in section
        assert "](reports/figures/" in section
