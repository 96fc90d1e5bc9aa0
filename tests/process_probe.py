"""What a process the project starts saw: every Python process run with :func:`probe_env`
writes, when it exits, its command line, the usage-reporting switches at its start and at its
end, and whether MLflow (where it imported it) started its usage-reporting client.

A ``sitecustomize`` module on ``PYTHONPATH`` does it: Python imports it at start-up, before the
script, in the stage processes DVC starts too. The environment leaves out what MLflow reads as a
test or CI run (it then reports nothing whatever the switches say), so that what the probe sees
is the switch's doing alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from ptsl.ops.telemetry import OFF

# The variables MLflow 3.17 takes for a CI or test run (mlflow/telemetry/utils.py,
# _is_ci_env_or_testing).
CI_MARKERS = ("PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CI", "CIRCLECI", "GITLAB_CI",
              "JENKINS_URL", "TRAVIS", "TF_BUILD", "BITBUCKET_BUILD_NUMBER",
              "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION", "CLOUD_RUN_EXECUTION",
              "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID")

_PROBE = f'''
import atexit, json, os, sys

_SWITCHES = {sorted(OFF)!r}
_AT_START = {{k: os.environ.get(k) for k in _SWITCHES}}


def _record():
    client = sys.modules.get("mlflow.telemetry.client")
    utils = sys.modules.get("mlflow.telemetry.utils")
    out = {{"argv": sys.argv, "at_start": _AT_START,
            "at_end": {{k: os.environ.get(k) for k in _SWITCHES}},
            "mlflow": client is not None,
            "mlflow_reports": client is not None and client.get_telemetry_client() is not None,
            "mlflow_sees_ci": utils is not None and utils._IS_IN_CI_ENV_OR_TESTING}}
    path = os.path.join(os.environ["PTSL_PROBE_DIR"], str(os.getpid()) + ".json")
    with open(path, "w") as f:
        json.dump(out, f)


atexit.register(_record)
'''


def probe_env(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` with the probe on and the CI markers left out; records go to ``folder``."""
    (folder / "sitecustomize.py").write_text(_PROBE)
    out = {k: v for k, v in env.items() if k not in CI_MARKERS}
    out["PYTHONPATH"] = str(folder) + (f":{env['PYTHONPATH']}" if env.get("PYTHONPATH") else "")
    out["PTSL_PROBE_DIR"] = str(folder)
    return out


def probed(folder: Path) -> list[dict]:
    """The records of every probed process that has exited."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
