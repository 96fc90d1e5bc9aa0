"""PTSL / PAL trunks: projection rules, sharing, residual maths, init, per-task gradients, and
which task parameters real SAC updates actually train (reference 5)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.nets.mlp import weight_init
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.agent.nets.pal import (FeedForwardPAL, PALLayer, init_pal_layers,
                           keep_down_projection, keep_up_projection)
from ptsl.core.agent.nets.task_index import TaskIndex

from ..helpers import random_batch



def _pal(in_dim: int = 20, hidden: int = 24, out: int = 3, layers: int = 3, pal: int = 6,
         tasks: int = 4, shared: bool = True, residual: str = "none",
         seed: int = 0) -> FeedForwardPAL:
    net = FeedForwardPAL(in_dim, hidden, out, layers, pal, tasks, shared_projection=shared,
                         residual_mode=residual)
    gen = torch.Generator().manual_seed(seed)
    weight_init(net, gen)
    init_pal_layers(net, gen)
    return net


def _randomise_projections(net: nn.Module, seed: int = 1) -> None:
    """Give every zero-initialised bias-free Linear and task bias a nonzero value."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Linear) and m.bias is None:
                m.weight.copy_(0.3 * torch.randn(m.weight.shape, generator=gen))
            if isinstance(m, PALLayer):
                m.task_bias.copy_(torch.randn(m.task_bias.shape, generator=gen))


# ----------------------------------------------------------------------------- structure


def test_automatic_projection_rule_matches_reference_decisions():
    # CARE+PTSL (input 100/104) projects down in layer 0; MT-SAC+PTSL (12/16) does not.
    assert keep_down_projection(100, 50, 10) and keep_down_projection(104, 50, 10)
    assert not keep_down_projection(12, 50, 10) and not keep_down_projection(16, 50, 10)
    # Output layers (8 or 1 wide) never project up.
    assert not keep_up_projection(8, 50, 50, 10) and not keep_up_projection(1, 50, 50, 10)
    net = FeedForwardPAL(12, 64, 8, 3, 50, 10)
    first, last = net.layers[0], net.layers[-1]
    assert first.down is None and first.task_weight.shape == (10, 12, 50)
    assert last.up is None and last.task_weight.shape == (10, 50, 8)
    assert last.task_bias.shape == (10, 8)


def test_layer_count_and_projection_sharing():
    shared = FeedForwardPAL(100, 32, 8, 3, 6, 5, shared_projection=True)
    assert len(shared.layers) == 4  # num_layers hidden layers + output layer, as build_mlp
    assert all(layer.down is shared.down for layer in shared.layers[1:])
    assert all(layer.up is shared.up for layer in shared.layers[:-1])
    assert shared.layers[0].down is not None and shared.layers[0].down is not shared.down
    indep = FeedForwardPAL(100, 32, 8, 3, 6, 5, shared_projection=False)
    downs = [layer.down for layer in indep.layers]
    ups = [layer.up for layer in indep.layers[:-1]]
    assert all(d is not None for d in downs) and len({id(d) for d in downs}) == 4
    assert all(u is not None for u in ups) and len({id(u) for u in ups}) == 3
    # Projections are never per task: plain 2-D matrices.
    for net in (shared, indep):
        for m in net.modules():
            if isinstance(m, nn.Linear) and m.bias is None:
                assert m.weight.ndim == 2


def test_residual_parameters_are_one_per_network():
    lin = FeedForwardPAL(100, 32, 8, 3, 6, 5, residual_mode="linear")
    base = FeedForwardPAL(100, 32, 8, 3, 6, 5)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(lin) - n(base) == 3
    assert torch.equal(lin.mix.alpha.detach(), torch.full((3,), 1 / 3))
    proj = FeedForwardPAL(100, 32, 8, 3, 6, 5, residual_mode="project")
    assert n(proj) - n(base) == 3 * 6 * 6


def test_residual_needs_projected_first_layer():
    with pytest.raises(ValueError, match="residual_mode='sum'.*layer 0"):
        FeedForwardPAL(12, 64, 8, 3, 50, 10, residual_mode="sum")


def test_init_rule_and_generator_determinism():
    net = _pal(residual="project")
    for m in net.modules():
        if isinstance(m, nn.Linear):
            if m.bias is None:
                assert not m.weight.any()  # D, U, R start at zero
            else:
                assert not m.bias.any() and m.weight.abs().max() <= np.sqrt(6 / sum(m.weight.shape))
        if isinstance(m, PALLayer):
            assert not m.task_bias.any()
            w = m.task_weight.detach()
            assert 0.7 < float(w.std()) < 1.3  # standard normal
    again = _pal(residual="project")
    for a, b in zip(net.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    other = _pal(residual="project", seed=1)
    assert not torch.equal(net.layers[1].task_weight, other.layers[1].task_weight)


# ----------------------------------------------------------------------------- maths


@pytest.mark.parametrize("residual", ["none", "sum", "linear", "project"])
@pytest.mark.parametrize("shared", [True, False])
def test_at_init_ptsl_is_exactly_its_shared_mlp(residual, shared):
    net = _pal(shared=shared, residual=residual)
    mlp = []
    for i, layer in enumerate(net.layers):
        mlp.append(copy.deepcopy(layer.shared))
        if i < len(net.layers) - 1:
            mlp.append(nn.ReLU())
    mlp = nn.Sequential(*mlp)
    g = torch.Generator().manual_seed(5)  # the test's own draws, whatever ran before it
    x = torch.randn(32, 20, generator=g)
    task = torch.randint(0, 4, (32,), generator=g)
    # A PAL layer computes S x + b and D x in one GEMM over the stacked weights [S; D] (faster
    # than a separate thin D x), and a GEMM of another width may round the last bit differently;
    # everything the zero projections add is exactly zero, so the outputs agree to float rounding.
    torch.testing.assert_close(net(x, TaskIndex(task, 4)), mlp(x), rtol=1e-6, atol=1e-6)


def _manual_forward(net: FeedForwardPAL, x: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
    """Row-by-row transcription of reference 5.2-5.4 (independent of the batched gather)."""
    outs = []
    for b in range(x.shape[0]):
        h, t, prev = x[b], int(task[b]), None
        for i, layer in enumerate(net.layers):
            z_raw = layer.down.weight @ h if layer.down is not None else h
            z = z_raw
            if i > 0 and net.residual_mode != "none":
                pz, py = prev
                if net.residual_mode == "sum":
                    z = z_raw + pz + py
                elif net.residual_mode == "linear":
                    a = net.mix.alpha
                    z = a[0] * z_raw + a[1] * pz + a[2] * py
                else:
                    z = net.mix.project.weight @ torch.cat([z_raw, pz, py])
            y_low = z @ layer.task_weight[t] + layer.task_bias[t]
            up = layer.up.weight @ y_low if layer.up is not None else y_low
            y = layer.shared.weight @ h + layer.shared.bias + up
            h = torch.relu(y) if layer.activation else y
            prev = (z_raw, y_low)
        outs.append(h)
    return torch.stack(outs)


@pytest.mark.parametrize("residual", ["none", "sum", "linear", "project"])
@pytest.mark.parametrize("shared", [True, False])
def test_forward_matches_formulas_on_a_mixed_task_batch(residual, shared):
    net = _pal(shared=shared, residual=residual)
    _randomise_projections(net)
    if residual == "linear":
        with torch.no_grad():
            net.mix.alpha.copy_(torch.tensor([0.5, -0.2, 0.9]))
    # The test's own input, whatever ran before it in this process (a draw from the global
    # generator once put a near-zero output's rounding beyond the tolerance).
    x = torch.randn(16, 20, generator=torch.Generator().manual_seed(6))
    task = torch.tensor([0, 1, 2, 3] * 4)
    torch.testing.assert_close(net(x, TaskIndex(task, 4)), _manual_forward(net, x, task), rtol=1e-4, atol=1e-4)


def test_task_parameters_get_gradient_only_from_their_own_samples():
    net = _pal(residual="sum")
    _randomise_projections(net)  # with zero D/U every task gradient would vanish trivially
    x = torch.randn(12, 20, generator=torch.Generator().manual_seed(7))
    task = torch.tensor([0, 1] * 6)
    out = net(x, TaskIndex(task, 4))
    out[task == 0].pow(2).sum().backward()
    for layer in net.layers:
        assert layer.task_weight.grad[0].abs().sum() > 0 and layer.task_bias.grad[0].abs().sum() > 0
        assert not layer.task_weight.grad[1:].any() and not layer.task_bias.grad[1:].any()


# ----------------------------------------------------------------------------- real updates


def _agent(shared: bool, residual: str, seed: int = 0):
    exp = ExperimentConfig(benchmark="mt10", method="care_ptsl", hidden_dim=32, num_layers=3,
                           pal_dim=8, shared_projection=shared, residual_mode=residual)
    cfg = RunConfig(name="t", seed=seed, experiment=exp, env=EnvConfig(), sac=SACConfig(),
                    train=TrainConfig(steps=1, eval_every=1, checkpoint_every=1))
    table = np.random.default_rng(seed).normal(size=(3, 768)).astype(np.float32)
    return build_agent(cfg, Shapes(12, 4, 3), ("a-v3", "b-v3", "c-v3"), task_embeddings=table)


def _changed_task_params(agent, updates: int) -> set[str]:
    """Names (relative to each PAL trunk) of task-branch tensors that changed in *every* trunk."""
    trunks = {"actor": agent.actor.trunk, "q1": agent.critic.q1, "q2": agent.critic.q2}

    def task_branch(trunk):
        return {n: p for n, p in trunk.named_parameters()
                if "task_" in n or "down" in n or "up" in n or "mix" in n}

    before = {k: {n: p.detach().clone() for n, p in task_branch(t).items()}
              for k, t in trunks.items()}
    for step in range(updates):
        agent.update(random_batch(n=96, seed=step))
    changed = [{n for n, p in task_branch(t).items() if not torch.equal(p.detach(), before[k][n])}
               for k, t in trunks.items()]
    assert changed[0] == changed[1] == changed[2], changed
    return changed[0]


def _all_task_params(agent) -> set[str]:
    return {n for n, _ in agent.actor.trunk.named_parameters()
            if "task_" in n or "down" in n or "up" in n or "mix" in n}


def test_shared_projection_trains_every_task_branch():
    """Default PTSL (shared D/U, no residual): the zero D learns first through the output layer
    (whose W_t is nonzero and which has no U), then U, then everything else; after a few real
    Adam updates every task parameter of actor and both Q's has moved."""
    agent = _agent(shared=True, residual="none")
    assert _changed_task_params(agent, 5) == _all_task_params(agent)


def test_independent_projections_leave_dead_task_branches():
    """Reference Q9, shared_projection=False: every layer but the output layer has its own
    zero D and zero U, so their task gradients are exactly zero forever. Only the output layer's
    task part (its own D, W_t, c_t) trains; all hidden-layer D, U, W_t, c_t stay at init."""
    agent = _agent(shared=False, residual="none")
    last = len(agent.actor.trunk.layers) - 1
    expected = {f"layers.{last}.down.weight", f"layers.{last}.task_weight",
                f"layers.{last}.task_bias"}
    assert _changed_task_params(agent, 5) == expected
    assert len(_all_task_params(agent) - expected) == 4 * (last)  # D, U, W_t, c_t per hidden layer


def test_project_residual_leaves_only_output_task_bias_alive():
    """Reference Q9, residual_mode=project: the zero R blocks the path by which D would
    learn, so D, U, R and every W_t stay at init; only the output layer's task bias c_t trains."""
    agent = _agent(shared=True, residual="project")
    last = len(agent.actor.trunk.layers) - 1
    assert _changed_task_params(agent, 5) == {f"layers.{last}.task_bias"}


@pytest.mark.parametrize("layer", ["grouped", "every_task"])
def test_task_layer_implementations_match_the_reference_gather(layer):
    """Both ways of computing the task layer (grouped by task on CPU, every task in one GEMM with
    static shapes on CUDA) give the reference's per-row gather and batched matmul (values and
    gradients), including a batch where one task has no row."""
    from ptsl.core.cuda.task_index import StaticTaskIndex

    kind = {"grouped": TaskIndex, "every_task": StaticTaskIndex}[layer]

    def fn(z, w, b, task):
        return kind(task, 4).layer(z, w, b)
    g = torch.Generator().manual_seed(0)
    task = torch.tensor([3, 0, 0, 2, 3, 3, 0, 2, 2, 0] * 7)  # task 1 absent
    ins = [torch.randn(70, 6, generator=g), torch.randn(4, 6, 5, generator=g),
           torch.randn(4, 5, generator=g)]
    ref_ins = [t.clone().requires_grad_() for t in ins]
    got_ins = [t.clone().requires_grad_() for t in ins]
    z, w, b = ref_ins
    ref = torch.bmm(z.unsqueeze(1), w[task]).squeeze(1) + b[task]
    got = fn(*got_ins, task)
    torch.testing.assert_close(got, ref)
    grad = torch.randn(70, 5, generator=g)
    ref.backward(grad)
    got.backward(grad)
    for r, o in zip(ref_ins, got_ins):
        torch.testing.assert_close(o.grad, r.grad)
    assert torch.all(got_ins[1].grad[1] == 0) and torch.all(got_ins[2].grad[1] == 0)
