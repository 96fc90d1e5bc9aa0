"""A run's bytes do not depend on the CPU thread count: the paper-size networks of every method
update and act to the same bits with 1 and with 2 torch threads, and the training stage writes
the same outputs with PTSL_THREADS=1 and 2 (a grid worker and the head train alike).

MKL sums matrix products of 5 to 11 rows across threads on this CPU, so products of one row per
task (acting, the task encoder) and small per-task groups (PTSL) are computed so that no product
has so few rows (see ptsl.nets.mlp.feature_major and ptsl.agent.one_cpu_thread).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml

from ptsl.buffer import Batch
from ptsl.config import parse_params, run_config
from ptsl.methods import Shapes, build_agent
from ptsl.validate import benchmark_tasks

from .pipeline_project import env_for, make_project

MT10 = benchmark_tasks("mt10")
EXPERIMENTS = ("mt10_mtsac", "mt10_softmod", "mt10_care", "mt10_care_ptsl", "mt10_sac_ptsl")
BATCH = 128  # the default budget's batch: about 13 rows per task, some tasks 5 to 11


def _batch(seed: int) -> Batch:
    rng = np.random.default_rng(seed)

    def t(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.normal(size=shape).astype(np.float32))

    return Batch(obs=t(BATCH, 39), action=torch.tanh(t(BATCH, 4)), reward=t(BATCH, 1),
                 next_obs=t(BATCH, 39), not_done=torch.ones(BATCH, 1),
                 task=torch.as_tensor(rng.integers(0, 10, BATCH)))


def _bits(raw_params: dict, experiment: str, threads: int) -> str:
    """Hash of the weights, Adam moments and two actions after three updates on ``threads``."""
    cfg = run_config(parse_params(raw_params), experiment, 1)
    torch.set_num_threads(threads)
    try:
        agent = build_agent(cfg, Shapes(39, 4, 10), MT10)
        for step in range(3):
            agent.update(_batch(step), step)
        obs = np.random.default_rng(9).normal(size=(10, 39)).astype(np.float32)
        actions = [agent.act(obs, np.arange(10), deterministic=d) for d in (True, False)]
    finally:
        torch.set_num_threads(1)
    h = hashlib.sha256()
    state = agent.training_state()
    for value in state["model"].values():
        h.update(value.numpy().tobytes())
    for opt in state["optimizers"].values():
        for moments in opt["state"].values():
            for value in moments.values():
                h.update(value.numpy().tobytes())
    for a in actions:
        h.update(a.tobytes())
    return h.hexdigest()


def test_the_batches_hold_small_task_groups():
    """What makes the comparison bite: groups of 5 to 11 rows, the sizes MKL splits."""
    sizes = {int(c) for s in range(3) for c in torch.bincount(_batch(s).task, minlength=10)}
    assert sizes & set(range(5, 12))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_update_and_acting_bits_do_not_depend_on_the_thread_count(raw_params, experiment):
    assert _bits(raw_params, experiment, 1) == _bits(raw_params, experiment, 2)


def test_training_stage_outputs_do_not_depend_on_the_thread_count(tmp_path, raw_params):
    """pipeline/train.py at the default sizes (CARE+PTSL 326x3 on MT10, batch 128) with
    PTSL_THREADS=1 and 2: every output byte equal."""
    exp = {k: v for k, v in raw_params["experiments"]["mt10_care_ptsl"].items() if k != "matches"}
    (tmp_path / "p").mkdir()
    root = make_project(tmp_path / "p", {"mt10_care_ptsl": exp}, seeds=[1])
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sac"].update(batch_size=BATCH, init_steps=20)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    outputs = {}
    for threads in ("1", "2"):
        out = tmp_path / f"threads{threads}"
        env = {**env_for(root), "PTSL_TRACKING": "off", "PTSL_THREADS": threads,
               "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        proc = subprocess.run([sys.executable, "pipeline/train.py", "--exp", "mt10_care_ptsl",
                               "--seed", "1", "--out", str(out)], cwd=root, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        run = out / "mt10_care_ptsl-1"
        outputs[threads] = {p.name: p.read_bytes() for p in sorted(run.iterdir())}
    assert list(outputs["1"]) == ["curve.csv", "model.pt", "model.pt.sha256", "summary.json"]
    for name, data in outputs["1"].items():
        assert outputs["2"][name] == data, name
