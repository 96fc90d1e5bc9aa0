"""The learning check as a slow test (not part of `make test`; run with `make test-slow`)."""

from __future__ import annotations

import pytest

from ptsl.tools.learning_check import main


@pytest.mark.slow
def test_mtsac_learns_reach(tmp_path):
    assert main(["--out", str(tmp_path / "curve.csv")]) == 0
