"""The fast machine check every training and evaluation stage runs first."""

from __future__ import annotations

import platform
from importlib.metadata import version

import pytest

from ptsl.core.errors import EnvCheckError
from ptsl.ops.machine import check_machine, package_versions, pinned_versions

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


def test_a_package_not_installed_is_refused_or_recorded_as_said():
    names = ("numpy", "no-such-package")
    with pytest.raises(EnvCheckError, match="package no-such-package is not installed; run"):
        package_versions(names)
    assert package_versions(names, missing="not installed") == {
        "python": platform.python_version(), "numpy": version("numpy"),
        "no-such-package": "not installed"}


def test_the_install_lock_holds_every_pin_at_its_version():
    """`make install` installs under requirements/lock.txt: a pin bumped without `make lock`
    would make uv refuse the install (or, were the lock loose, install another set than pip)."""
    import re

    def names(pins):
        return {re.sub(r"[-_.]+", "-", k): v for k, v in pins.items()}

    lock = names(pinned_versions(ROOT / "requirements" / "lock.txt"))
    roles = [p for p in sorted((ROOT / "requirements").glob("*.txt")) if p.name != "lock.txt"]
    for path in [ROOT / "requirements.txt", *roles]:
        for name, pin in names(pinned_versions(path)).items():
            assert lock.get(name) == pin, f"{path.name}: {name}=={pin}, lock: {lock.get(name)}"
    assert "uv" in lock and "torch" in lock


def test_missing_requirements_file_is_one_line(tmp_path):
    with pytest.raises(EnvCheckError, match="requirements.txt not found: the pinned versions"):
        check_machine(tmp_path / "requirements.txt")


def test_check_env_draws_the_training_seeds_task_list(tmp_path):
    """The stage builds every benchmark from the first training seed's goal list, the one
    training caches, so a project draws one list per benchmark (MT50's takes tens of seconds)."""
    import os
    import subprocess
    import sys

    from ..pipeline_project import env_for, make_project

    exps = {"tiny": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 16,
                     "num_layers": 2}}
    (tmp_path / "p").mkdir()
    root = make_project(tmp_path / "p", exps, seeds=[3, 4])
    cache = tmp_path / "tasks"
    env = {**env_for(root), "PTSL_TASK_CACHE": str(cache), "PTSL_TRACKING": "off"}
    proc = subprocess.run([sys.executable, "pipeline/check_env.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [p.name.split("-mw")[0] for p in cache.glob("*.pkl")] == ["reach-v3-seed3"]
    assert os.path.isfile(root / "reports" / "benchmarks.json")
