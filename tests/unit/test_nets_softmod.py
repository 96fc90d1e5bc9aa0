"""Soft Modularization (reference 3): routing distributions, routed forward pass, expert
init, tied encoders, hard-coded depth, the critic's obs-action projection, and real updates."""

from __future__ import annotations

import numpy as np
import torch

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.nets.mlp import ExpertLinear, init_expert_layers
from ptsl.core.agent.nets.soft_modularization import ObsActionProjection, SoftModularizedMLP
from ptsl.core.agent.nets.task_index import TaskIndex
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig

from ..helpers import param_ids, random_batch



def _cfg(hidden: int = 32, num_layers: int = 3, experts: int = 4) -> RunConfig:
    exp = ExperimentConfig(benchmark="mt10", method="softmod", hidden_dim=hidden,
                           num_layers=num_layers, num_experts=experts)
    return RunConfig(name="t", seed=0, experiment=exp, env=EnvConfig(), sac=SACConfig(),
                     train=TrainConfig(steps=1, eval_every=1, checkpoint_every=1))


def _agent(**kw):
    return build_agent(_cfg(**kw), Shapes(12, 4, 3), ("a-v3", "b-v3", "c-v3"))




def test_routing_weights_are_distributions_over_source_modules():
    agent = _agent()
    trunk = agent.actor.trunk
    task = torch.tensor([0, 1, 2, 1])
    x = agent.actor.encoder(torch.randn(4, 12))
    probs = trunk.routing_weights(x, agent.encode_task(TaskIndex(task, 3)))
    assert probs.shape == (1, 4, 4, 4)  # one routing step, B, E (target), E (source)
    assert (probs >= 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 4, 4))
    # Routing depends on the task: same features, different task -> different routing.
    same_x = x[:1].expand(3, -1)
    p = trunk.routing_weights(same_x, agent.encode_task(TaskIndex(torch.tensor([0, 1, 2]), 3)))
    assert not torch.allclose(p[0, 0], p[0, 1])


def test_forward_is_the_routed_mean_of_modules():
    gen = torch.Generator().manual_seed(0)
    net = SoftModularizedMLP(num_experts=3, in_dim=6, out_dim=2, hidden_dim=5)
    init_expert_layers(net, gen)
    with torch.no_grad():
        for layer in net.layers:
            layer.bias.normal_(generator=gen)
    x, enc = torch.randn(4, 6), torch.randn(4, 6)
    p = net.routing_weights(x, enc)[0]  # (B, E, E)
    for b in range(4):
        hidden = [torch.relu(x[b] @ net.layers[0].weight[j] + net.layers[0].bias[j, 0])
                  for j in range(3)]
        routed = [sum(p[b, i, j] * hidden[j] for j in range(3)) for i in range(3)]
        outs = [routed[i] @ net.layers[1].weight[i] + net.layers[1].bias[i, 0] for i in range(3)]
        torch.testing.assert_close(net(x, None, enc)[b], sum(outs) / 3)


def test_expert_init_is_xavier_per_module_with_zero_bias():
    agent = _agent()
    layers = [m for m in agent.modules() if isinstance(m, ExpertLinear)]
    assert layers
    for m in layers:
        assert not m.bias.any()
        bound = np.sqrt(6 / (m.in_dim + m.out_dim))
        assert m.weight.abs().max() <= bound and m.weight.abs().max() > 0.5 * bound
        assert not torch.equal(m.weight[0], m.weight[1])


def test_structure_depth_encoder_tying_and_optimisers():
    agent = _agent(hidden=32, num_layers=3)
    # Reference Q7: depth is fixed at 2 modular layers whatever num_layers says.
    assert len(agent.actor.trunk.layers) == 2
    assert agent.parameter_count() == _agent(hidden=32, num_layers=4).parameter_count()
    # Tied encoders (one module), trained by the critic optimiser only.
    assert agent.actor.encoder is agent.critic.encoder
    enc_ids = param_ids(agent.critic.encoder.parameters())
    actor_opt = {id(p) for g in agent.actor_opt.param_groups for p in g["params"]}
    critic_opt = {id(p) for g in agent.critic_opt.param_groups for p in g["params"]}
    assert actor_opt == param_ids(agent.actor.trunk.parameters()) and not actor_opt & enc_ids
    assert enc_ids <= critic_opt
    # Critic Q: Linear(50 + 4 -> 50) projection, then a soft-modularized trunk (out 1).
    q = agent.critic.q1
    assert isinstance(q, ObsActionProjection)
    assert (q.projection.in_features, q.projection.out_features) == (54, 50)
    assert q.trunk.layers[-1].out_dim == 1 and agent.actor.trunk.layers[-1].out_dim == 8
    # Learned task embedding (no pretrained table).
    assert agent.task_encoder.embedding.table.weight.shape == (3, 50)


def test_real_updates_train_encoder_routing_and_task_embedding():
    agent = _agent()
    snap = {n: t.detach().clone() for n, t in agent.state_dict().items()}
    for step in range(3):
        losses = agent.update(random_batch(seed=step))
        assert all(torch.isfinite(v) for v in losses.values())
    now = agent.state_dict()

    def moved(prefix: str) -> bool:
        names = [n for n in snap if n.startswith(prefix)]
        assert names, prefix
        return any(not torch.equal(snap[n], now[n]) for n in names)

    for prefix in ("critic.encoder.", "actor.trunk.routing.", "critic.q1.trunk.routing.",
                   "critic.q1.projection.", "task_encoder.embedding.table.", "task_encoder.trunk."):
        assert moved(prefix), prefix
