"""Config validation: one clear error naming the key and what is allowed; no output written."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from ptsl.config import ConfigError, parse_params, run_config

from .conftest import ROOT


def test_project_params_are_valid(raw_params):
    params = parse_params(raw_params)
    for name in params.runs.plain + params.runs.ptsl:
        cfg = run_config(params, name, params.seeds[0])
        assert cfg.key() == run_config(params, name, params.seeds[0]).key()


@pytest.mark.parametrize("mutate, key, allowed", [
    (lambda p: p["experiments"]["mt10_mtsac"].update(method="sacx"),
     "experiments.mt10_mtsac.method", "allowed: mtsac"),
    (lambda p: p["experiments"]["mt10_mtsac"].update(benchmark="mt11"),
     "experiments.mt10_mtsac.benchmark", "mt10, mt50"),
    (lambda p: p["experiments"]["mt10_mtsac"].update(hidden_dim=0),
     "experiments.mt10_mtsac.hidden_dim", ">= 1"),
    (lambda p: p["sac"].update(batch_size=-5), "sac.batch_size", ">= 1"),
    (lambda p: p["train"].update(stepz=3), "train.stepz", "allowed: steps"),
    (lambda p: p.update(bogus=1), "bogus", "allowed:"),
    (lambda p: p["env"].update(goals="random"), "env.goals", "fixed, resample"),
    (lambda p: p["env"].update(normalize_reward="yes"), "env.normalize_reward", "true or false"),
    (lambda p: p["runs"].update(plain=["nope"]), "runs.plain", "allowed: mt10_mtsac"),
])
def test_bad_params_name_key_and_allowed(raw_params, mutate, key, allowed):
    bad = copy.deepcopy(raw_params)
    mutate(bad)
    with pytest.raises(ConfigError) as err:
        parse_params(bad)
    msg = str(err.value)
    assert msg.startswith(key), msg
    assert allowed in msg
    assert "\n" not in msg


def test_stage_script_fails_with_one_line_and_writes_nothing(raw_params, tmp_path):
    bad = copy.deepcopy(raw_params)
    bad["experiments"]["mt10_mtsac"]["method"] = "unknown_method"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(bad))
    out = tmp_path / "runs"
    proc = subprocess.run([sys.executable, str(ROOT / "pipeline" / "train.py"), "--exp",
                           "mt10_mtsac", "--seed", "1", "--params", str(params), "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert lines == ["error: experiments.mt10_mtsac.method: unknown value 'unknown_method'; "
                     "allowed: " + ", ".join(__import__("ptsl.config").config.METHODS)]
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [params]
