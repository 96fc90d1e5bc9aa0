"""Installed as ``sitecustomize.py`` (its folder first on PYTHONPATH), every Python process of a
test run appends one JSON line at exit to $CENSUS_OUT (default /tmp/census.jsonl): its command
line, wall and CPU time, which heavy modules it imported and the test it ran under
(PYTEST_CURRENT_TEST, inherited by subprocesses). Processes killed by a signal write nothing.
Record: reports/bench/2026-11-28-test-processes/."""

import atexit
import json
import os
import resource
import sys
import time

_T0 = time.time()
_HEAVY = ("torch", "mlflow", "metaworld", "pandas", "dvc", "ray", "matplotlib", "sqlalchemy")


def _log() -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {"argv": sys.argv[:6], "wall": round(time.time() - _T0, 3),
              "cpu": round(usage.ru_utime + usage.ru_stime, 3),
              "mods": [m for m in _HEAVY if m in sys.modules],
              "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "pid": os.getpid()}
    with open(os.environ.get("CENSUS_OUT", "/tmp/census.jsonl"), "a") as out:
        out.write(json.dumps(record) + "\n")


atexit.register(_log)
