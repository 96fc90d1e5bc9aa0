"""PaCo's trunk (Meta-World+'s nn/paco.py): shapes, their formulation transcribed, per-task
gradients, parameter counts against the hand formula and the authors' actor counts,
initialisation and determinism."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ptsl.core.agent.builders import Shapes, build_networks
from ptsl.core.agent.nets.paco import ACTOR_HEAD_SCALE, CRITIC_HEAD_SCALE, PaCoMLP
from ptsl.core.config import ExperimentConfig, SACConfig

from ..helpers import (assert_matches_transcription, assert_only_row_has_grad,
                       backward_task_by_task, parameter_count, task_index)


def _net(in_dim: int = 12, hidden: int = 32, out: int = 8, layers: int = 3, tasks: int = 4,
         sets: int = 3, seed: int = 0, scale: float = ACTOR_HEAD_SCALE) -> PaCoMLP:
    net = PaCoMLP(in_dim, hidden, out, layers, tasks, sets, scale)
    net.reset_parameters(torch.Generator().manual_seed(seed))
    # Their head starts near zero; a larger one makes the formulation test see the head's sets.
    with torch.no_grad():
        net.task_bias.normal_(generator=torch.Generator().manual_seed(seed + 1))
    return net


# ----------------------------------------------------------------------------- structure


def test_shapes_and_layers():
    net = _net()
    x, task = torch.randn(20, 12), task_index(torch.arange(20) % 4)
    assert net(x, task).shape == (20, 8)
    # K sets of every layer, the head's too, each laid out as nn.Linear's (out, in)
    assert [tuple(layer.weight.shape) for layer in net.layers] == [
        (3, 32, 12), (3, 32, 32), (3, 32, 32), (3, 8, 32)]
    assert [tuple(layer.bias.shape) for layer in net.layers] == [(3, 32)] * 3 + [(3, 8)]
    assert tuple(net.task_weights.shape) == (4, 3) and tuple(net.task_bias.shape) == (3,)
    with pytest.raises(ValueError, match="num_parameter_sets >= 1"):
        PaCoMLP(12, 32, 8, 3, 4, 0, ACTOR_HEAD_SCALE)


def _their_forward(net: PaCoMLP, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """PaCoNetwork.__call__ transcribed: ``w_tau = Dense(K)(one_hot)``, then per layer every
    parameter set on the input (``CompositionalDense``, out_axes=-2: ``(B, K, n)``),
    ``einsum("bkn,bk->bn")``, ReLU; the head likewise without ReLU."""
    one_hot = F.one_hot(c, num_classes=net.task_weights.shape[0]).float()
    w_tau = one_hot @ net.task_weights + net.task_bias
    h = x
    for i, layer in enumerate(net.layers):
        per_set = torch.stack([h @ layer.weight[k].T + layer.bias[k]
                               for k in range(layer.weight.shape[0])], dim=1)
        h = torch.einsum("bkn,bk->bn", per_set, w_tau)
        if i < len(net.layers) - 1:
            h = torch.relu(h)
    return h


@pytest.mark.parametrize("sets", [1, 3, 5])
def test_output_is_their_formulation(sets):
    assert_matches_transcription(_net(sets=sets), _their_forward, atol=1e-6)


# ----------------------------------------------------------------------------- gradients


def test_a_tasks_gradient_reaches_its_own_weights_and_the_shared_sets():
    net = _net(sets=4)
    for i in backward_task_by_task(net):
        # Its own row of composition weights, no other task's.
        assert_only_row_has_grad((net.task_weights,), i, "task")
        # Every parameter set of every layer, and the Dense's bias, are shared by all tasks.
        assert net.task_bias.grad.abs().sum() > 0
        for layer in net.layers:
            for p in (layer.weight, layer.bias):
                assert all(p.grad[k].abs().sum() > 0 for k in range(4))


# ----------------------------------------------------------------------------- counts


def _formula(d: int, o: int, h: int, layers: int, tasks: int, k: int) -> int:
    """One PaCo network: the task Dense ``T K + K``, then ``K`` sets of every layer,
    ``K (d H + H + (L - 1)(H^2 + H) + H o + o)``."""
    return tasks * k + k + k * (d * h + h + (layers - 1) * (h * h + h) + h * o + o)


@pytest.mark.parametrize("obs,hidden,layers,tasks,k", [(39, 400, 3, 10, 5), (39, 400, 3, 50, 20),
                                                       (12, 96, 2, 10, 2)])
def test_parameter_count_is_the_hand_formula(obs, hidden, layers, tasks, k):
    for d, o in ((obs, 8), (obs + 4, 1)):  # actor (mean and log-std of 4 actions), one Q
        net = PaCoMLP(d, hidden, o, layers, tasks, k, ACTOR_HEAD_SCALE)
        assert parameter_count(net) == _formula(d, o, hidden, layers, tasks, k)


def test_actor_counts_are_the_published_runs_and_the_agent_count_by_hand():
    """The parameter-scaling figure's data gives PaCo's actor 1.7001M parameters on MT10 and
    6.80118M on MT50 (rainx0r/mtrl f5c121f figures/fig1_new_*.svg): the 400x3 actor with K 5
    and 20 at the 39-dim observation. By the reference rule (actor + critic + critic target +
    log-alpha): MT10 1,700,095 + 4 * 1,694,060 + 10 = 8,476,345; MT50 6,801,180 + 4 *
    6,777,040 + 50 = 33,909,390."""
    for tasks, k, actor_want, want in ((10, 5, 1_700_095, 8_476_345),
                                       (50, 20, 6_801_180, 33_909_390)):
        actor = PaCoMLP(39, 400, 8, 3, tasks, k, ACTOR_HEAD_SCALE)
        q = PaCoMLP(43, 400, 1, 3, tasks, k, CRITIC_HEAD_SCALE)
        assert parameter_count(actor) == actor_want
        assert parameter_count(actor) + 4 * parameter_count(q) + tasks == want


# ----------------------------------------------------------------------------- init, determinism


def test_initialisation_is_meta_world_plus():
    exp = ExperimentConfig(benchmark="mt10", method="paco", hidden_dim=64, num_layers=3)
    nets = build_networks(exp, SACConfig(), Shapes(39, 4, 10), torch.Generator().manual_seed(0))
    for trunk, scale in ((nets.actor.trunk, ACTOR_HEAD_SCALE), (nets.critic.q1, CRITIC_HEAD_SCALE),
                         (nets.critic.q2, CRITIC_HEAD_SCALE)):
        *hidden, head = trunk.layers
        for layer in hidden:  # He-uniform per set, zero bias
            bound = math.sqrt(6 / layer.in_dim)
            assert 0.9 * bound < layer.weight.abs().max() <= bound
            assert not layer.bias.any()
            assert not torch.equal(layer.weight[0], layer.weight[1])
        # U(+-1e-3) actor, U(+-3e-3) critic, biases too (a Q's head has one bias per set)
        assert 0.9 * scale < head.weight.abs().max() <= scale
        assert 0 < head.bias.abs().max() <= scale
        bound = math.sqrt(6 / 10)  # He-uniform over the one-hot's 10 inputs, zero bias
        assert 0.5 * bound < trunk.task_weights.abs().max() <= bound
        assert not trunk.task_bias.any()
