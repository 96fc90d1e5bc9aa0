"""Code lives where code lives: the output folders hold what the pipeline, the benchmark and the
probes wrote (tables, figures, records), and the probes whose figures the records keep live in
tools/probes/."""

from __future__ import annotations

from ..conftest import ROOT

#: Folders of outputs and records.
OUTPUT_FOLDERS = ("reports", "data")


def test_the_output_folders_hold_no_python():
    code = [str(p.relative_to(ROOT)) for folder in OUTPUT_FOLDERS
            for p in (ROOT / folder).rglob("*.py")]
    assert not code, f"code in an output folder (move it to tools/probes/ or src/): {code}"
