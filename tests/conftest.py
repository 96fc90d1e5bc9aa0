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

# One torch thread in the test process: on a busy 2-core machine torch's worker threads spin and
# slow small-batch tests by an order of magnitude. (Stage subprocesses keep torch's default.)
torch.set_num_threads(1)


@pytest.fixture
def raw_params() -> dict:
    """The project's params.yaml as a plain dict (tests mutate copies of it)."""
    return yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture(scope="session")
def task_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tasks")
