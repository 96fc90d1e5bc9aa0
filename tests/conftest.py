"""Shared fixtures: tiny real configurations (real Meta-World, shrunk budgets)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Unit tests run without MLflow; the end-to-end test switches it back on with its own store.
os.environ.setdefault("PTSL_TRACKING", "off")
# DVC reports usage from a daemon process after each command unless told not to (the project's
# .dvc/config says `analytics = false`; the test projects are made with `dvc init`): about 0.4 s
# of a core per command, some 150 times a run.
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

# One torch thread in the test process: on a busy 2-core machine torch's worker threads spin and
# slow small-batch tests by an order of magnitude. (Stage subprocesses keep torch's default.)
torch.set_num_threads(1)


@pytest.fixture
def raw_params() -> dict:
    """The project's params.yaml as a plain dict (tests mutate copies of it)."""
    return yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture(scope="session", autouse=True)
def task_cache(tmp_path_factory) -> Path:
    """One Meta-World task cache (goal lists) for the whole run, every xdist worker and every
    stage process of every test project included (``PTSL_TASK_CACHE``, inherited by the
    subprocesses): each (benchmark, seed) list is generated once, by the real Meta-World, instead
    of once per project (MT10's about 10 s here). Its files are written atomically."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # .../pytest-N/popen-gwK: share pytest-N's
        base = base.parent
    folder = base / "task-cache"
    folder.mkdir(exist_ok=True)
    os.environ["PTSL_TASK_CACHE"] = str(folder)
    return folder


# Under xdist (`make test`: `-n auto --dist loadfile`) each file goes to one worker, in
# collection order, the next one to whichever worker is about to run out. Longest first (as
# measured on a 2-core machine with `--durations=0`, in seconds of each file's tests): the long
# pipelines spread over the workers and the short files fill in behind them, instead of one long
# file running alone at the end.
SLOWEST_FIRST = ("test_grid.py",            # 225
                 "test_faults.py",          # 170
                 "test_methods_e2e.py",     # 120
                 "test_bench.py",           # 90
                 "test_study_e2e.py",       # 85
                 "test_bad_input.py",       # 65 (its stage-script cases share one process)
                 "test_pipeline_e2e.py",    # 65
                 "test_ablation_e2e.py",    # 60
                 "test_protocols_e2e.py",   # 60
                 "test_gpu_path.py", "test_restored.py",  # 50
                 "test_stage_deps.py", "test_api.py",  # 32-33
                 "test_loop.py", "test_threads.py",  # 28-29
                 "test_tracking_concurrency.py", "test_docs.py", "test_thread_count.py",  # 22-24
                 "test_envs.py", "test_import_layers.py",  # 17-19
                 "test_grid_address.py", "test_bench_record.py", "test_counting.py",  # 11-13
                 "test_eval_tasks.py", "test_views.py")  # 11


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file and among the rest is kept


@pytest.fixture
def tracking_on(monkeypatch):
    """MLflow tracking on, with the project's own store (no server, no DVC experiment)."""
    from ptsl.ops import tracking

    monkeypatch.setenv(tracking.TRACKING_ENV, "on")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_EXP_NAME", raising=False)
