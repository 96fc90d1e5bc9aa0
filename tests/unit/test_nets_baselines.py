"""What every trunk of the field's baselines holds, whatever its architecture: the same weights
for the same seed (and others for another), the same bits on one and two CPU threads, and the
static-shape task selection's values (the CUDA graph's)."""

from __future__ import annotations

from typing import Callable

import pytest
import torch
from torch import nn

from ptsl.core.agent.nets.moore import MOOREMLP
from ptsl.core.agent.nets.multihead import MultiHeadMLP
from ptsl.core.agent.nets.paco import ACTOR_HEAD_SCALE, PaCoMLP

from ..helpers import (assert_same_bits_at_one_and_two_threads,
                       assert_static_selection_gives_the_same_values)

# 39-dim input, width 64, 8 outputs, 10 tasks.
TRUNKS: dict[str, Callable[[], nn.Module]] = {
    "multihead": lambda: MultiHeadMLP(39, 64, 8, 3, 10),
    "moore": lambda: MOOREMLP(39, 64, 8, 3, 10, 4),
    "paco": lambda: PaCoMLP(39, 64, 8, 3, 10, 5, ACTOR_HEAD_SCALE),
}


def _trunk(name: str, seed: int = 0, biases: bool = True) -> nn.Module:
    """``name``'s trunk initialised from ``seed``; with ``biases``, nonzero biases (several
    architectures start them at zero) so that a test sees the bias terms too."""
    net = TRUNKS[name]()
    net.reset_parameters(torch.Generator().manual_seed(seed))
    if biases:
        gen = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for pname, p in net.named_parameters():
                if pname.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return net


@pytest.mark.parametrize("name", TRUNKS)
def test_same_seed_same_weights(name):
    a, b, c = (_trunk(name, seed, biases=False) for seed in (3, 3, 4))
    for (key, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), key
    for key, p in a.state_dict().items():
        if p.any():  # a tensor that starts at zero (a bias) is zero whatever the seed
            assert not torch.equal(p, c.state_dict()[key]), key


@pytest.mark.parametrize("batch", [128, 1280])
@pytest.mark.parametrize("name", TRUNKS)
def test_same_bits_at_one_and_two_threads(name, batch):
    assert_same_bits_at_one_and_two_threads(_trunk(name), batch)


@pytest.mark.parametrize("name", TRUNKS)
def test_static_formulation_gives_the_same_values(name):
    """Every per-task selection goes through the TaskIndex, so the static-shape one a CUDA graph
    needs applies as it is."""
    assert_static_selection_gives_the_same_values(_trunk(name))
