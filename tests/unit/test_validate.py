"""The validate stage's checks (src/ptsl/validate.py) on the project's own params.yaml."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from ptsl.core.errors import ConfigError
from ptsl.ops.params import parse_params
from ptsl.core.errors import CorruptFileError
from ptsl.core.benchmarks import benchmark_tasks
from ptsl.ops.paths import STAMP, write_stamp
from ptsl.ops.validate import check_embeddings, trained_experiments, validate_project

from ..conftest import ROOT


def test_project_is_valid_and_the_stamp_in_git_is_the_constant(tmp_path):
    params = validate_project(ROOT, environ={})
    assert set(trained_experiments(params)) == set(params.runs.plain + params.runs.ptsl)
    # The committed output is exactly what the stage writes, so a clone's stages are up to date.
    assert (ROOT / "data" / "validated.json").read_text() == STAMP
    stamp = tmp_path / "validated.json"
    write_stamp(stamp)
    mtime = stamp.stat().st_mtime_ns
    write_stamp(stamp)
    assert stamp.read_text() == STAMP and stamp.stat().st_mtime_ns == mtime  # never rewritten


def test_benchmark_task_names_come_without_building_the_benchmark():
    mt10, mt50 = benchmark_tasks("mt10"), benchmark_tasks("mt50")
    assert len(mt10) == 10 and len(mt50) == 50 and mt10[0] == "reach-v3"
    assert benchmark_tasks("push-v3") == ("push-v3",)


def test_embeddings_must_cover_every_task_a_care_row_trains_on(tmp_path, raw_params):
    experiments = trained_experiments(parse_params(raw_params))
    full = json.loads((ROOT / "data" / "task_embeddings" / "metaworld-mt50.json").read_text())
    check_embeddings(experiments, ROOT / "data" / "task_embeddings" / "metaworld-mt50.json")
    # The MT10 file lacks the MT50 tasks the MT50 CARE rows need.
    with pytest.raises(CorruptFileError, match=r"metaworld-mt10.json: task embeddings file is "
                                                r"unreadable \(no embedding for task '"):
        check_embeddings(experiments, ROOT / "data" / "task_embeddings" / "metaworld-mt10.json")
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps({**full, "reach-v1": [float("nan")] * 768}))
    with pytest.raises(CorruptFileError, match="'reach-v3' is not a list of 768 finite numbers"):
        check_embeddings(experiments, nan)
    # No CARE row, no file needed.
    plain = {k: v for k, v in experiments.items() if v.method not in ("care", "care_ptsl")}
    check_embeddings(plain, tmp_path / "absent.json")


def test_an_architecture_the_sizes_cannot_express_is_found_before_training(tmp_path, raw_params):
    """A residual mode with a rank above the CARE trunk's input width (100) makes the automatic
    rule skip the first layer's projection: only building the networks finds it, and validate
    builds every trained experiment's networks once, before anything trains."""
    bad = copy.deepcopy(raw_params)
    bad["pal_dim"] = 300  # <= every hidden_dim that reads it, so the params alone are fine
    parse_params(bad)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match=r"^experiments\.mt10_care_ptsl_\w+: residual_mode="
                                          r"'\w+' needs every PAL layer .* layer 0 maps 100 -> 300"):
        validate_project(tmp_path, environ={})


def test_machine_settings_are_values_only(raw_params):
    with pytest.raises(ConfigError, match="PTSL_DEVICE: unknown device 'tpu'"):
        validate_project(ROOT, environ={"PTSL_DEVICE": "tpu"})
    # Whether a GPU is there is for the machine that trains to say (a cluster head may have none).
    validate_project(ROOT, environ={"PTSL_DEVICE": "cuda"})


def test_a_bad_params_file_is_answered_before_torch_loads(tmp_path, raw_params):
    """Most malformed inputs are the params file's: the stage answers them without the second
    or two that loading torch costs (the networks are built only once the file is valid)."""
    import subprocess
    import sys

    raw_params["train"]["steps"] = 0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw_params, sort_keys=False))
    code = ("import sys\n"
            "from pathlib import Path\n"
            "from ptsl.core.errors import ConfigError\n"
            "from ptsl.ops.validate import validate_project\n"
            "try:\n"
            f"    validate_project(Path({str(tmp_path)!r}), environ={{}})\n"
            "except ConfigError as exc:\n"
            "    print(exc)\n"
            "print('torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.splitlines() == ["train.steps: must be >= 1, got 0", "False"], proc.stderr
