"""The README's Python API examples run as written, so they cannot rot.

Every ```python block right after an ``<!-- api-example ... -->`` comment is run in a fresh
process from an empty folder (the project installed, nothing else there). Blocks without the
marker need a pipeline run first (``load_agent("data/runs/...")``) and are not run. The first
example's output shown in the README must be exactly what it prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .conftest import ROOT

MARKER = re.compile(r"<!-- api-example[^>]*-->\s*```python\n(.*?)```", re.S)


def _examples() -> list[str]:
    return MARKER.findall((ROOT / "README.md").read_text())


def test_readme_has_the_api_examples():
    blocks = _examples()
    assert len(blocks) == 2
    assert '"mtsac", "reach-v3"' in blocks[0] and "pal_dim=16" in blocks[1]
    assert len(blocks[0].strip().splitlines()) <= 10


@pytest.mark.parametrize("index", [0, 1])
def test_readme_example_runs(index, tmp_path, task_cache):
    # Share the session's Meta-World goal cache (MT10's goals take ~20 s to generate).
    (tmp_path / ".scratch").mkdir()
    (tmp_path / ".scratch" / "tasks").symlink_to(task_cache, target_is_directory=True)
    (tmp_path / "example.py").write_text(_examples()[index])
    # One torch thread, as in the test process (conftest.py): torch's threads spin on busy cores.
    env = dict(os.environ, PTSL_TRACKING="off", PTSL_THREADS="1")
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    if index == 0:
        assert lines[0].split() == ["step", "success", "return"] and len(lines) == 6
        assert lines[4].startswith("{'reach-v3': ")
        # The output the README shows is this run's, byte for byte (CPU runs are deterministic).
        shown = re.search(r"The first example prints[^\n]*\n\n```\n(.*?)```",
                          (ROOT / "README.md").read_text(), re.S)
        assert shown is not None and proc.stdout == shown.group(1)
    else:
        assert [line.split(":")[0] for line in lines[:3]] == ["step 0", "step 50", "step 100"]
        assert re.fullmatch(r"[\d,]+ parameters, \d+ s", lines[3])
        assert 0.0 <= float(lines[4]) <= 1.0
