"""A run's bytes do not depend on the CPU thread count: the paper-size networks of every method
update and act to the same bits with 1 and with 2 torch threads (tests/e2e/test_thread_count.py
runs the training stage itself both ways).

How MKL splits a matrix product across threads, and so its last bits, depends on the thread
count and on the CPU: on an AMD EPYC it splits products of 5 to 11 rows, on an AVX-512 Xeon also
batch-1280 products of every method and Soft Modularization's and MOORE's at batch 128. So the
agent acts and updates on one thread whatever the process's thread count
(ptsl.core.agent.sac.one_cpu_thread), and the tests below run at the paper's batch too.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from ptsl.core.agent.buffer import Batch
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.benchmarks import benchmark_tasks
from ptsl.ops.params import parse_params, run_config


MT10 = benchmark_tasks("mt10")
EXPERIMENTS = ("mt10_mtsac", "mt10_softmod", "mt10_care", "mt10_care_ptsl", "mt10_sac_ptsl",
               "mt10_mhsac", "mt10_moore", "mt10_paco")
BATCH = 128  # the default budget's batch: about 13 rows per task, some tasks 5 to 11


PAPER_BATCH = 1280  # where the task-indexed selections' backward once split across threads


def _batch(seed: int, size: int = BATCH) -> Batch:
    rng = np.random.default_rng(seed)

    def t(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.normal(size=shape).astype(np.float32))

    return Batch(obs=t(size, 39), action=torch.tanh(t(size, 4)), reward=t(size, 1),
                 next_obs=t(size, 39), not_done=torch.ones(size, 1),
                 task=torch.as_tensor(rng.integers(0, 10, size)))


def _bits(raw_params: dict, experiment: str, threads: int, batch: int = BATCH,
          updates: int = 3) -> str:
    """Hash of the weights, Adam moments and two actions after ``updates`` updates on
    ``threads``."""
    cfg = run_config(parse_params(raw_params), experiment, 1)
    torch.set_num_threads(threads)
    try:
        agent = build_agent(cfg, Shapes(39, 4, 10), MT10)
        for step in range(updates):
            agent.update(_batch(step, batch))
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


@pytest.mark.parametrize("experiment", ["mt10_mtsac", "mt10_care_ptsl"])
def test_the_same_at_the_papers_batch(raw_params, experiment):
    assert (_bits(raw_params, experiment, 1, batch=PAPER_BATCH, updates=1)
            == _bits(raw_params, experiment, 2, batch=PAPER_BATCH, updates=1))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_paper_batch_bits_are_the_same_run_to_run_with_two_threads(raw_params, experiment):
    """At batch 1280 with 2 threads an accumulating index_put (``enc[task]``) once summed in a
    different order from run to run (CARE, CARE+PTSL): two runs of two updates each."""
    assert _bits(raw_params, experiment, 2, PAPER_BATCH, updates=2) == \
        _bits(raw_params, experiment, 2, PAPER_BATCH, updates=2)
