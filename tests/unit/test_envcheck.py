"""The fast machine check every training and evaluation stage runs first."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from ptsl.core.errors import EnvCheckError
from ptsl.ops.machine import check_machine, pinned_versions

from ..conftest import ROOT


def test_this_machine_runs_the_pins():
    record = check_machine(ROOT / "requirements" / "compute.txt")
    pins = pinned_versions(ROOT / "requirements" / "compute.txt")
    assert set(pins) == {"torch", "mujoco", "metaworld", "gymnasium", "numpy", "pandas"}
    assert record["versions"]["metaworld"] == pins["metaworld"]
    assert record["torch"]["device"] in ("cpu", "cuda") and record["host"]


def test_a_version_other_than_the_pin_stops_with_one_line(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("# pins\nnumpy==0.0.1  # not this one\nmujoco==" + version("mujoco") + "\n")
    with pytest.raises(EnvCheckError) as err:
        check_machine(req)
    assert str(err.value) == (f"numpy {version('numpy')} is installed but {req} pins 0.0.1; "
                              "run `make install` on this machine")


def test_a_local_build_tag_is_the_machine_s_business(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text(f"torch=={version('torch').split('+')[0]}\n")
    check_machine(req)  # a CUDA build (2.13.0+cu128) satisfies the pin 2.13.0


def test_missing_requirements_file_is_one_line(tmp_path):
    with pytest.raises(EnvCheckError, match="requirements.txt not found: the pinned versions"):
        check_machine(tmp_path / "requirements.txt")
