"""Small helpers shared by the network tests."""

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
