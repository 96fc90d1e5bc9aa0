"""CARE: embeddings loader, mixture-of-encoders, tying, optimiser membership and the
gradient-flow rules of reference 4.3-4.4 (quirks included), checked on real updates."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.nets.task_encoder import DEFAULT_EMBEDDINGS, load_task_embeddings
from ptsl.core.agent.nets.task_index import TaskIndex
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.persistence import load_agent, save_agent

from ..helpers import param_ids, random_batch

MT10_V3 = ("reach-v3", "push-v3", "pick-place-v3", "door-open-v3", "drawer-open-v3",
           "drawer-close-v3", "button-press-topdown-v3", "peg-insert-side-v3", "window-open-v3",
           "window-close-v3")



# ----------------------------------------------------------------------------- embeddings


def test_embeddings_map_v3_names_onto_the_v1_file():
    table = load_task_embeddings(MT10_V3)
    assert table.shape == (10, 768) and table.dtype == np.float32
    raw = json.loads((DEFAULT_EMBEDDINGS.parent / "metaworld-mt10.json").read_text())
    for row, name in zip(table, MT10_V3):
        np.testing.assert_array_equal(row, np.float32(raw[name.replace("-v3", "-v1")]))
    single = load_task_embeddings(["window-close-v3"])
    np.testing.assert_array_equal(single[0], table[-1])


def test_embeddings_errors_name_file_and_task(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_task_embeddings(["reach-v3"], missing)
    mt10 = DEFAULT_EMBEDDINGS.parent / "metaworld-mt10.json"
    with pytest.raises(ValueError, match=r"metaworld-mt10.json.*'hammer-v3'"):
        load_task_embeddings(["reach-v3", "hammer-v3"], mt10)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"reach-v1": [0.0, 1.0]}))
    with pytest.raises(ValueError, match="bad.json.*768"):
        load_task_embeddings(["reach-v3"], bad)


# ----------------------------------------------------------------------------- agent helpers

TABLE = np.random.default_rng(0).normal(size=(3, 768)).astype(np.float32)


def _cfg(method: str = "care", hidden: int = 32) -> RunConfig:
    exp = ExperimentConfig(benchmark="mt10", method=method, hidden_dim=hidden, num_layers=2,
                           pal_dim=8 if method == "care_ptsl" else None)
    return RunConfig(name="t", seed=0, experiment=exp, env=EnvConfig(), sac=SACConfig(),
                     train=TrainConfig(steps=1, eval_every=1, checkpoint_every=1))


def _agent(method: str = "care"):
    return build_agent(_cfg(method), Shapes(12, 4, 3), ("a-v3", "b-v3", "c-v3"),
                       task_embeddings=TABLE)




def _opt_ids(opt: torch.optim.Optimizer) -> set[int]:
    return {id(p) for group in opt.param_groups for p in group["params"]}


# ----------------------------------------------------------------------------- structure


def test_sizes_match_the_reference():
    agent = build_agent(_cfg(), Shapes(12, 4, 10), MT10_V3)
    enc = agent.critic.encoder
    assert sum(p.numel() for p in enc.parameters()) == 18_104  # reference 4.1
    te = agent.task_encoder
    assert sum(p.numel() for p in te.parameters() if p.requires_grad) == 89_600  # reference 4.2
    assert te.embedding.table.shape == (10, 768) and not any(
        p.data_ptr() == te.embedding.table.data_ptr() for p in te.parameters())  # frozen buffer
    assert agent.actor.trunk.net[0].in_features == 100  # concat(z_enc, task encoding)
    assert agent.critic.q1.net[0].in_features == 104


def test_mixture_is_the_gate_weighted_average_of_experts():
    agent = _agent()
    enc = agent.critic.encoder
    obs, task = torch.randn(5, 12), TaskIndex(torch.tensor([0, 1, 2, 0, 1]), 3)
    te = agent.encode_task(task)
    gate = enc.gate(te)
    assert torch.allclose(gate.sum(-1), torch.ones(5)) and (gate >= 0).all()
    experts = enc.experts(obs)  # (E, B, 50)
    manual = sum(gate[:, k:k + 1] * experts[k] for k in range(experts.shape[0]))
    torch.testing.assert_close(enc(obs, task, te), manual)


def test_tying_and_optimiser_membership():
    agent = _agent()
    a_enc, c_enc = agent.actor.encoder, agent.critic.encoder
    # Actor experts are the critic's Parameter objects; the gates are separate.
    assert a_enc.experts is c_enc.experts
    assert not param_ids(a_enc.gate.parameters()) & param_ids(c_enc.gate.parameters())
    assert _opt_ids(agent.actor_opt) == param_ids(agent.actor.trunk.parameters())
    assert _opt_ids(agent.critic_opt) == param_ids(agent.critic.parameters())
    assert param_ids(c_enc.experts.parameters()) <= _opt_ids(agent.critic_opt)
    assert _opt_ids(agent.task_encoder_opt) == param_ids(agent.task_encoder.parameters())
    # Reference Q8: the actor's attention MLP is in no optimiser at all.
    every_opt = set().union(*(_opt_ids(o) for o in (agent.actor_opt, agent.critic_opt,
                                                     agent.alpha_opt, agent.task_encoder_opt)))
    assert not param_ids(a_enc.gate.parameters()) & every_opt


def test_critic_gate_input_is_not_detached():
    """Reference Q8 (misspelt detach key): the critic's gate passes gradient to the task encoding."""
    agent = _agent()
    task = TaskIndex(torch.tensor([0, 1, 2]), 3)
    te = agent.encode_task(task).detach().requires_grad_(True)
    agent.critic.encoder(torch.randn(3, 12), task, te).sum().backward()
    assert te.grad is not None and te.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- real updates


def test_task_encoder_is_trained_by_the_critic_loss_only():
    """Reference 4.4: during ``update`` the task encoding receives gradient exactly once, in the critic
    backward pass (before the critic step); the actor and alpha losses see a detached copy."""
    agent = _agent()
    phase = {"critic_stepped": False}
    hits: list[tuple[bool, float]] = []
    critic_step = agent.critic_opt.step

    def step_and_mark(*args, **kwargs):
        phase["critic_stepped"] = True
        return critic_step(*args, **kwargs)

    agent.critic_opt.step = step_and_mark  # type: ignore[method-assign]

    def watch(_module, _inp, out):
        if out.requires_grad:
            out.register_hook(
                lambda g: hits.append((phase["critic_stepped"], float(g.abs().sum()))))

    handle = agent.task_encoder.register_forward_hook(watch)
    agent.update(random_batch())
    handle.remove()
    assert len(hits) == 1 and hits[0][0] is False and hits[0][1] > 0
    grads = [p.grad for p in agent.task_encoder.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_what_real_updates_train():
    """After real updates: critic experts (= actor experts), critic gate, task-encoder MLPs and
    the actor trunk change; the actor's gate (reference Q8) and the frozen table do not."""
    agent = _agent()
    snap = {n: t.detach().clone() for n, t in agent.state_dict().items()}
    for step in range(3):
        agent.update(random_batch(seed=step))
    now = agent.state_dict()

    def moved(prefix: str) -> bool:
        names = [n for n in snap if n.startswith(prefix)]
        assert names, prefix
        return any(not torch.equal(snap[n], now[n]) for n in names)

    assert moved("critic.encoder.experts.") and moved("actor.encoder.experts.")
    assert moved("critic.encoder.gate.") and moved("actor.trunk.") and moved("critic.q1.")
    assert moved("task_encoder.embedding.projection.") and moved("task_encoder.trunk.")
    assert not moved("actor.encoder.gate.")
    assert not moved("task_encoder.embedding.table")


@pytest.mark.parametrize("method", ["care", "care_ptsl"])
def test_saved_agent_reloads_with_its_table(tmp_path, method):
    agent = _agent(method)
    agent.update(random_batch())
    path = tmp_path / "model.pt"
    save_agent(agent, path)
    loaded = load_agent(str(path))
    for (n, a), (m, b) in zip(agent.state_dict().items(), loaded.state_dict().items()):
        assert n == m and torch.equal(a, b), n
    obs = np.random.default_rng(1).normal(size=(3, 12)).astype(np.float32)
    np.testing.assert_array_equal(agent.act(obs, np.arange(3)), loaded.act(obs, np.arange(3)))
