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
