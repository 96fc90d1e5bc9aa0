"""MOORE's trunk (the authors' networks_sac.py and mixture_layers.py): shapes, the authors'
formulation transcribed, orthonormal experts, per-task gradients, parameter counts,
initialisation and determinism."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ptsl.core.agent.nets.moore import MOOREMLP, gram_schmidt

from ..helpers import (assert_matches_transcription, assert_only_row_has_grad,
                       backward_task_by_task, parameter_count, task_index)


def _net(in_dim: int = 12, hidden: int = 32, out: int = 8, layers: int = 3, tasks: int = 4,
         experts: int = 3, seed: int = 0) -> MOOREMLP:
    net = MOOREMLP(in_dim, hidden, out, layers, tasks, experts)
    net.reset_parameters(torch.Generator().manual_seed(seed))
    return net


# ----------------------------------------------------------------------------- structure


def test_shapes_and_layers():
    net = _net()
    x, task = torch.randn(20, 12), task_index(torch.arange(20) % 4)
    assert net(x, task).shape == (20, 8)
    assert net.expert_basis(x).shape == (3, 20, 32)
    assert [tuple(e.weight.shape) for e in net.experts] == [(3, 12, 32), (3, 32, 32), (3, 32, 32)]
    assert tuple(net.task_weights.shape) == (4, 3)
    assert tuple(net.head.weight.shape) == (4, 32, 8) and tuple(net.head.bias.shape) == (4, 8)
    with pytest.raises(ValueError, match="num_experts <= hidden_dim"):
        MOOREMLP(12, 4, 8, 3, 4, 5)


def _authors_forward(net: MOOREMLP, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """MetaworldSACMixtureMHActorNetwork.forward with InputLayer, ParallelLayer and
    OrthogonalLayer1D, transcribed: a loop over the experts, Gram-Schmidt with batched matmuls,
    the one-hot through a bias-free Linear, ``w @ features``, tanh, a loop over the tasks."""
    k, num_tasks = net.task_weights.shape[1], net.task_weights.shape[0]
    outs = []
    for e in range(k):  # ParallelLayer: expert e's Sequential on its copy of the input
        h = x
        for i, layer in enumerate(net.experts):
            h = h @ layer.weight[e] + layer.bias[e, 0]
            if i < len(net.experts) - 1:
                h = torch.relu(h)
        outs.append(h)
    x1 = torch.stack(outs).transpose(0, 1)  # OrthogonalLayer1D
    basis = torch.unsqueeze(x1[:, 0, :] / torch.unsqueeze(torch.linalg.norm(x1[:, 0, :], axis=1),
                                                          1), 1)
    for i in range(1, x1.shape[1]):
        v = torch.unsqueeze(x1[:, i, :], 1)
        w = v - torch.matmul(torch.matmul(v, torch.transpose(basis, 2, 1)), basis)
        basis = torch.cat([basis, w / torch.unsqueeze(torch.linalg.norm(w, axis=2), 2)], axis=1)
    features = basis  # (B, k, H), as after torch.permute(features, (1, 0, 2))
    w = (F.one_hot(c, num_classes=num_tasks).float() @ net.task_weights).unsqueeze(1)
    features = torch.tanh((w @ features).squeeze(1))
    a = torch.zeros(x.shape[0], net.head.out_dim)
    for ci in torch.unique(c):
        idx = torch.argwhere(c == ci).ravel()
        a[idx] = features[idx] @ net.head.weight[ci] + net.head.bias[ci]
    return a


@pytest.mark.parametrize("experts", [1, 3, 6])
def test_output_is_the_authors_formulation(experts):
    assert_matches_transcription(_net(experts=experts), _authors_forward, atol=1e-5)


# ----------------------------------------------------------------------------- orthonormality


@pytest.mark.parametrize("experts,hidden", [(2, 32), (4, 400), (6, 400), (10, 64)])
def test_expert_outputs_are_orthonormal_per_sample(experts, hidden):
    net = _net(in_dim=39, hidden=hidden, experts=experts, tasks=10)
    basis = net.expert_basis(torch.randn(64, 39) * 3)  # (k, B, H)
    gram = torch.einsum("ibh,jbh->bij", basis, basis)
    eye = torch.eye(experts).expand_as(gram)
    torch.testing.assert_close(gram, eye, rtol=0, atol=1e-5)


def test_gram_schmidt_spans_the_same_subspaces_in_expert_order():
    """u_0 is x_0 normalised, and each x_i lies in span(u_0..u_i): Gram-Schmidt, not another
    orthonormalisation."""
    x = torch.randn(5, 7, 16, dtype=torch.float64)
    u = gram_schmidt(x)
    torch.testing.assert_close(u[0], x[0] / x[0].norm(dim=-1, keepdim=True))
    for i in range(5):
        coeffs = torch.einsum("jbh,bh->bj", u[:i + 1], x[i])
        torch.testing.assert_close(torch.einsum("bj,jbh->bh", coeffs, u[:i + 1]), x[i])


# ----------------------------------------------------------------------------- gradients


def test_head_i_only_receives_task_is_gradient():
    net = _net(experts=4)
    for i in backward_task_by_task(net):
        # The task's head and its row of mixing weights; no other task's.
        assert_only_row_has_grad((net.head.weight, net.head.bias, net.task_weights), i, "task")
        # The experts are shared by every task.
        assert all(p.grad.abs().sum() > 0 for p in net.experts.parameters())


# ----------------------------------------------------------------------------- counts


def _formula(d: int, o: int, h: int, layers: int, tasks: int, k: int) -> int:
    """One MOORE network: mixing table ``T k``, experts ``k (d H + H + (L - 1)(H^2 + H))``, heads
    ``T (H o + o)``."""
    return tasks * k + k * (d * h + h + (layers - 1) * (h * h + h)) + tasks * (h * o + o)


@pytest.mark.parametrize("obs,hidden,layers,tasks,k", [(39, 400, 3, 10, 4), (39, 400, 3, 50, 6),
                                                       (12, 96, 2, 10, 2)])
def test_parameter_count_is_the_reference_formula(obs, hidden, layers, tasks, k):
    for d, o in ((obs, 8), (obs + 4, 1)):  # actor (mean and log-std of 4 actions), one Q
        net = MOOREMLP(d, hidden, o, layers, tasks, k)
        assert parameter_count(net) == _formula(d, o, hidden, layers, tasks, k)


def test_agent_count_by_hand():
    """The reference rule (actor + critic + critic target + log-alpha, reference 5.6) at the
    authors' sizes, 39-dim observation, 4 actions. MT10, 4 experts: actor 10*4 + 4*(39*400+400
    + 2*(400^2+400)) + 10*(400*8+8) = 1,379,320; one Q 40 + 4*(43*400+400 + 2*(400^2+400))
    + 10*401 = 1,357,650; total 1,379,320 + 4 * 1,357,650 + 10 = 6,809,930. MT50, 6 experts:
    2,181,500 + 4 * 2,050,750 + 50 = 10,384,550. (The authors' own summary counts the same
    networks without log-alpha.)"""
    for tasks, k, want in ((10, 4, 6_809_930), (50, 6, 10_384_550)):
        actor = MOOREMLP(39, 400, 8, 3, tasks, k)
        q = MOOREMLP(43, 400, 1, 3, tasks, k)
        assert parameter_count(actor) + 4 * parameter_count(q) + tasks == want


# ----------------------------------------------------------------------------- init, determinism


def test_initialisation_is_the_authors():
    net = _net(in_dim=39, hidden=64, tasks=10, experts=4)
    for layer in net.experts:  # PyTorch's Linear default, U(+-1/sqrt(fan_in)), biases included
        bound = 1 / math.sqrt(layer.in_dim)
        for p in (layer.weight, layer.bias):
            assert p.abs().max() <= bound and p.abs().max() > 0.9 * bound
        assert not torch.equal(layer.weight[0], layer.weight[1])
    bound = math.sqrt(6 / (10 + 4))  # Xavier over the (T, k) table
    assert net.task_weights.abs().max() <= bound and net.task_weights.abs().max() > 0.5 * bound
    xavier = math.sqrt(6 / (64 + 8))
    for t in range(10):
        assert net.head.weight[t].abs().max() <= xavier
    assert net.head.bias.abs().max() <= 1 / math.sqrt(64) and net.head.bias.any()
