"""Small helpers shared by the network and update tests."""

from __future__ import annotations

import torch

from ptsl.core.buffer import Batch


def random_batch(n: int = 64, seed: int = 0, obs_dim: int = 12, num_tasks: int = 3) -> Batch:
    """A reproducible random batch whose rows cycle through ``num_tasks`` tasks."""
    g = torch.Generator().manual_seed(seed)
    return Batch(obs=torch.randn(n, obs_dim, generator=g),
                 action=torch.rand(n, 4, generator=g) * 2 - 1,
                 reward=torch.randn(n, 1, generator=g),
                 next_obs=torch.randn(n, obs_dim, generator=g),
                 not_done=torch.ones(n, 1), task=torch.arange(n) % num_tasks)


def param_ids(params) -> set[int]:
    """Identity set of parameters (to compare optimiser membership and tying)."""
    return {id(p) for p in params}


def assert_same_training_state(want: dict, got: dict) -> None:
    """Two agents' ``training_state()``: every weight and every Adam moment equal bit for bit
    (the next update of a resumed run starts from the same state)."""
    assert want["model"].keys() == got["model"].keys()
    for key, value in want["model"].items():
        assert torch.equal(got["model"][key], value), key
    for opt, state in want["optimizers"].items():
        for idx, moments in state["state"].items():
            for k, v in moments.items():
                assert torch.equal(got["optimizers"][opt]["state"][idx][k], v), f"{opt}.{idx}.{k}"
