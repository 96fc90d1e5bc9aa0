"""Multi-head SAC's trunk (mtrl's multi-head option, reference 2.3): shapes, mtrl's masked
formulation, per-task gradients, parameter counts, initialisation and determinism."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ptsl.core.agent.nets.multihead import MultiHeadMLP, TaskLinear

from ..helpers import assert_only_row_has_grad, parameter_count, task_index


def _net(in_dim: int = 12, hidden: int = 32, out: int = 8, layers: int = 3, tasks: int = 4,
         head_layers: int = 2, seed: int = 0) -> MultiHeadMLP:
    net = MultiHeadMLP(in_dim, hidden, out, layers, tasks, head_layers)
    net.reset_parameters(torch.Generator().manual_seed(seed))
    return net


def _randomise_biases(net: nn.Module, seed: int = 1) -> None:
    """Nonzero biases, so that a test also sees the bias terms (mtrl starts them at zero)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


# ----------------------------------------------------------------------------- structure


def test_shapes_and_layers():
    net = _net()
    x, task = torch.randn(20, 12), task_index(torch.arange(20) % 4)
    assert net(x, task).shape == (20, 8)
    linears = [m for m in net.body if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(12, 32)] + [(32, 32)] * 3
    assert [tuple(h.weight.shape) for h in net.heads] == [(4, 32, 32), (4, 32, 8)]
    assert [tuple(h.bias.shape) for h in net.heads] == [(4, 32), (4, 8)]
    one = _net(head_layers=1)
    assert len(one.heads) == 1 and tuple(one.heads[0].weight.shape) == (4, 32, 8)
    with pytest.raises(ValueError, match="head_layers >= 1"):
        MultiHeadMLP(12, 32, 8, 3, 4, head_layers=0)


def _mtrl_forward(net: MultiHeadMLP, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """mtrl's formulation: every head on every row (``moe_layer.FeedForward``), then the
    ``MaskCache`` mask ``eye(T)[task]``: masked sum over heads over the mask's sum."""
    h = torch.relu(net.body(x)).expand(net.heads[0].num_tasks, *x.shape[:1], -1)
    for i, head in enumerate(net.heads):
        h = (torch.relu(h) if i else h).matmul(head.weight) + head.bias.unsqueeze(1)
    mask = torch.eye(net.heads[0].num_tasks)[ids].t().unsqueeze(2)  # (T, B, 1)
    return (h * mask).sum(dim=0) / mask.sum(dim=0)


def test_output_is_mtrls_masked_sum_over_heads():
    net = _net()
    _randomise_biases(net)
    x, ids = torch.randn(24, 12), torch.tensor([3, 0, 0, 2, 1, 3] * 4)
    torch.testing.assert_close(net(x, task_index(ids)), _mtrl_forward(net, x, ids),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("head_layers", [1, 2])
def test_head_i_only_receives_task_is_gradient(head_layers):
    net = _net(head_layers=head_layers)
    _randomise_biases(net)
    ids = torch.tensor([0, 1, 2, 3, 2, 1] * 4)
    x = torch.randn(len(ids), 12)
    for i in range(4):
        net.zero_grad(set_to_none=True)
        net(x, task_index(ids))[ids == i].pow(2).sum().backward()
        for head in net.heads:
            assert_only_row_has_grad((head.weight, head.bias), i, "head")
        # The shared body learns from every task.
        assert all(p.grad.abs().sum() > 0 for p in net.body.parameters())


# ----------------------------------------------------------------------------- counts


def _formula(d: int, o: int, h: int, layers: int, tasks: int, head_layers: int = 2) -> int:
    """mtrl's multi-head network: body ``build_mlp(d, H, H, L)`` = ``dH + H + L (H^2 + H)``;
    heads ``T ((m - 1)(H^2 + H) + H o + o)`` for ``m`` head layers."""
    body = d * h + h + layers * (h * h + h)
    return body + tasks * ((head_layers - 1) * (h * h + h) + h * o + o)


# mtrl's 400x3 at MT10, a small MT50 one, and the Meta-World+ shape (obs + one-hot input,
# three activated layers, one head layer).
@pytest.mark.parametrize("obs,hidden,layers,tasks,head_layers", [
    (12, 400, 3, 10, 2), (39, 64, 3, 50, 2), (49, 400, 2, 10, 1)])
def test_parameter_count_is_the_reference_formula(obs, hidden, layers, tasks, head_layers):
    for d, o in ((obs, 8), (obs + 4, 1)):  # actor (mean and log-std of 4 actions), one Q
        net = MultiHeadMLP(d, hidden, o, layers, tasks, head_layers)
        assert parameter_count(net) == _formula(d, o, hidden, layers, tasks, head_layers)


def test_agent_count_by_hand():
    """The reference rule (actor + critic + critic target + log-alpha, reference 5.6) at mtrl's
    size, 400x3, MT10, 12-dim observation (Meta-World v1), 4 actions:
    actor body 12*400+400 + 3*(400^2+400) = 486,400, heads 10*((400^2+400) + 400*8+8)
    = 1,636,080; one Q: body 16*400+400 + 3*(400^2+400) = 488,000, heads 10*((400^2+400) + 401)
    = 1,608,010; total 2,122,480 + 4 * 2,096,010 + 10 = 10,506,530. At 39 dims: 10,560,530."""
    for obs, want in ((12, 10_506_530), (39, 10_560_530)):
        actor = MultiHeadMLP(obs, 400, 8, 3, 10)
        q = MultiHeadMLP(obs + 4, 400, 1, 3, 10)
        assert parameter_count(actor) + 4 * parameter_count(q) + 10 == want


# ----------------------------------------------------------------------------- init, determinism


def test_initialisation_is_mtrls():
    net = _net(hidden=48)
    for m in net.body:
        if isinstance(m, nn.Linear):
            assert not m.bias.any()
            assert m.weight.abs().max() <= math.sqrt(6 / sum(m.weight.shape))
    for head in net.heads:
        assert isinstance(head, TaskLinear) and not head.bias.any()
        bound = math.sqrt(6 / (head.in_dim + head.out_dim))
        for t in range(head.num_tasks):  # Xavier-uniform per task: spread over the whole range
            w = head.weight[t].detach()
            assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
        assert not torch.equal(head.weight[0], head.weight[1])
