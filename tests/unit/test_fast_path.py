"""The fast path is the same agent run differently: for every method it gives the same losses
and the same parameters as the plain path, and a CPU run stays deterministic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptsl.core.buffer import ReplayBuffer
from ptsl.core.builders import Shapes, build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.loop import train
from ptsl.core.runtime import Runtime

from ..helpers import assert_same_training_state

SHAPES = Shapes(obs_dim=39, action_dim=4, num_tasks=4)
NAMES = ("reach-v3", "push-v3", "pick-place-v3", "door-open-v3")

# Every method, and the PTSL variants whose gradient paths differ (independent projections,
# each residual mode), at small sizes.
METHODS = {
    "mtsac": {"method": "mtsac", "hidden_dim": 32, "num_layers": 3},
    "mtsac_onehot": {"method": "mtsac", "hidden_dim": 32, "num_layers": 2, "task_onehot": True},
    "softmod": {"method": "softmod", "hidden_dim": 32},
    "care": {"method": "care", "hidden_dim": 32, "num_layers": 3},
    "care_ptsl": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8},
    "care_ptsl_indep": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 2, "pal_dim": 8,
                        "shared_projection": False},
    "care_ptsl_sum": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8,
                      "residual_mode": "sum"},
    "care_ptsl_linear": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8,
                         "residual_mode": "linear"},
    "care_ptsl_project": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8,
                          "residual_mode": "project"},
    "sac_ptsl": {"method": "sac_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8},
}


def _cfg(exp: dict) -> RunConfig:
    return RunConfig(name="t", seed=3, experiment=ExperimentConfig(benchmark="mt10", **exp),
                     env=EnvConfig(), sac=SACConfig(batch_size=48),
                     train=TrainConfig(steps=10, eval_every=5, checkpoint_every=5))


def _buffer() -> ReplayBuffer:
    rng = np.random.default_rng(0)
    n = 500
    buf = ReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim)
    buf.add(rng.normal(size=(n, 39)).astype(np.float32),
            rng.uniform(-1, 1, size=(n, 4)).astype(np.float32), rng.normal(size=n),
            rng.normal(size=(n, 39)).astype(np.float32), np.ones(n), rng.integers(0, 4, size=n))
    return buf


def _run(exp: dict, fast: bool, updates: int = 5):
    agent = build_agent(_cfg(exp), SHAPES, NAMES)
    agent.fast_path = fast
    buf, rng = _buffer(), np.random.default_rng(1)
    losses = [{k: float(v) for k, v in agent.update(buf.sample(48, rng), s).items()}
              for s in range(updates)]
    return losses, agent.training_state()


@pytest.mark.parametrize("name", list(METHODS))
def test_fast_path_gives_the_plain_paths_losses_and_parameters(name):
    plain_losses, plain = _run(METHODS[name], fast=False)
    fast_losses, fast = _run(METHODS[name], fast=True)
    # On CPU the two paths run the same kernels on the same values: equal to the last bit.
    assert fast_losses == plain_losses
    assert_same_training_state(plain, fast)  # Adam moments too
    # The comparison is not vacuous: the updates moved the weights.
    fresh = build_agent(_cfg(METHODS[name]), SHAPES, NAMES).state_dict()
    assert any(not torch.equal(fresh[k], v) for k, v in fast["model"].items())


def _loop_cfg() -> RunConfig:
    return RunConfig(
        name="tiny", seed=2,
        experiment=ExperimentConfig(benchmark="reach-v3", method="care_ptsl", hidden_dim=32,
                                    num_layers=2, pal_dim=8),
        env=EnvConfig(episode_length=20),
        sac=SACConfig(batch_size=32, init_steps=20),
        train=TrainConfig(steps=60, eval_every=20, checkpoint_every=20))


def test_training_loop_fast_equals_plain_and_is_deterministic(task_cache):
    """The whole loop (environment stepping overlapped with the update, deferred loss checks)
    gives the plain loop's curve, and two fast runs give the same bytes."""
    runs = [train(_loop_cfg(), task_cache=task_cache, progress=False,
                  runtime=Runtime(device="cpu", fast=fast)) for fast in (False, True, True)]
    plain, fast, again = runs
    assert fast.curve.to_csv() == again.curve.to_csv()
    fast_w, again_w = fast.agent.state_dict(), again.agent.state_dict()
    assert all(torch.equal(fast_w[k], again_w[k]) for k in fast_w)
    assert fast.curve.to_csv() == plain.curve.to_csv()
    plain_w = plain.agent.state_dict()
    assert all(torch.equal(fast_w[k], plain_w[k]) for k in plain_w)
