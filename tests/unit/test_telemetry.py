"""Usage reporting off (:mod:`ptsl.ops.telemetry`): each switch set where the environment does
not set it, a user's own value kept, and set in any process that imports ``ptsl.ops``
(tests/e2e/test_restored.py checks the stage processes DVC starts)."""

from __future__ import annotations

import os
import subprocess
import sys

from ptsl.ops.telemetry import OFF, switch_off


def test_switches_are_set_where_unset_and_a_user_s_value_stays():
    env = {"MLFLOW_DISABLE_TELEMETRY": "false", "HOME": "/h"}
    assert switch_off(env) == {"RAY_USAGE_STATS_ENABLED": "0"}
    assert env == {"MLFLOW_DISABLE_TELEMETRY": "false", "RAY_USAGE_STATS_ENABLED": "0",
                   "HOME": "/h"}
    assert switch_off(env) == {}


def test_importing_ops_switches_reporting_off_before_mlflow_reads_it():
    env = {k: v for k, v in os.environ.items() if k not in OFF}
    code = ("import os, ptsl.ops, mlflow.telemetry.utils as u; "
            "print(os.environ['MLFLOW_DISABLE_TELEMETRY'], os.environ['RAY_USAGE_STATS_ENABLED'],"
            " u.MLFLOW_DISABLE_TELEMETRY.get())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["true", "0", "True"]
