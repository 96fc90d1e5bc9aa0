"""Parameter counts by PTSL's rule (reference 5.6), taken from built networks so that they follow
the architecture actually trained. :mod:`ptsl.tools.counting` solves matched sizes with it; the
params validation checks with it that a matched row can match at all."""

from __future__ import annotations

import numpy as np
import torch

from .agent.builders import Shapes, build_networks
from .agent.sac import MultiTaskSAC
from .benchmarks import EMBEDDING_DIM
from .config import ExperimentConfig, SACConfig
from .methods import method


def count_parameters(exp: ExperimentConfig, obs_dim: int, action_dim: int, num_tasks: int) -> int:
    """Parameters of ``exp``'s agent by the reference rule (task encoder excluded)."""
    shapes = Shapes(obs_dim, action_dim, num_tasks)
    # Values do not matter for a count; the frozen table is a buffer and the task encoder is
    # excluded anyway, so a zero table stands in for the embeddings file.
    table = (np.zeros((num_tasks, EMBEDDING_DIM), np.float32)
             if method(exp.method).embeddings else None)
    gen = torch.Generator().manual_seed(0)
    nets = build_networks(exp, SACConfig(), shapes, gen, table)
    agent = MultiTaskSAC(nets, num_tasks, action_dim, SACConfig(),
                         torch.Generator().manual_seed(0))
    return agent.parameter_count()
