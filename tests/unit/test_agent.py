"""MT-SAC networks and update rule, checked against the reference's behaviour."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptsl.core.agent.buffer import ReplayBuffer
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.sac import check_losses, squashed_sample
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.errors import TrainingDiverged

SHAPES = Shapes(obs_dim=39, action_dim=4, num_tasks=5)


def _cfg(seed: int = 0, **exp) -> RunConfig:
    e = ExperimentConfig(benchmark="mt10", method="mtsac", hidden_dim=32, num_layers=3, **exp)
    return RunConfig(name="t", seed=seed, experiment=e, env=EnvConfig(),
                     sac=SACConfig(batch_size=64),
                     train=TrainConfig(steps=10, eval_every=5, checkpoint_every=5))


def _buffer(tasks=(0, 1, 2, 3, 4), n=400, seed=0) -> ReplayBuffer:
    rng = np.random.default_rng(seed)
    buf = ReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim)
    buf.add(rng.normal(size=(n, 39)).astype(np.float32),
            rng.uniform(-1, 1, size=(n, 4)).astype(np.float32), rng.normal(size=n),
            rng.normal(size=(n, 39)).astype(np.float32), np.ones(n),
            rng.choice(np.array(tasks), size=n))
    return buf


def test_reference_mtsac_shapes_and_counts():
    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    linears = [m for m in agent.actor.trunk.modules() if isinstance(m, torch.nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(39, 32), (32, 32), (32, 32), (32, 8)]
    q = [m for m in agent.critic.q1.modules() if isinstance(m, torch.nn.Linear)]
    assert (q[0].in_features, q[-1].out_features) == (43, 1)
    assert agent.log_alpha.shape == (5,) and torch.allclose(agent.log_alpha, torch.zeros(5))
    assert agent.target_entropy == -4.0
    for l in linears:  # Xavier-uniform weights, zero biases
        assert torch.all(l.bias == 0)
        bound = (6 / (l.in_features + l.out_features)) ** 0.5
        assert l.weight.abs().max() <= bound
    expected = sum(p.numel() for p in agent.actor.parameters()) \
        + 2 * sum(p.numel() for p in agent.critic.parameters()) + 5
    assert agent.parameter_count() == expected


def test_onehot_variant_sees_task():
    agent = build_agent(_cfg(task_onehot=True), SHAPES, tuple("abcde"))
    first = next(m for m in agent.actor.trunk.modules() if isinstance(m, torch.nn.Linear))
    assert first.in_features == 39 + 5
    obs = np.zeros((2, 39), np.float32)
    a = agent.act(obs, np.array([0, 1]))
    assert not np.allclose(a[0], a[1])  # same observation, different task -> different action


def test_log_std_squashed_into_bounds_and_actions_in_range():
    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    obs = torch.randn(256, 39) * 100
    mu, log_std = agent.actor(obs, torch.zeros(256, dtype=torch.long), None)
    assert log_std.min() >= -20 and log_std.max() <= 2
    a, logp = squashed_sample(mu, log_std, torch.Generator().manual_seed(0))
    assert a.abs().max() <= 1 and torch.isfinite(logp).all()
    single = agent.act(np.zeros(39, np.float32), 3)
    assert single.shape == (4,)
    with pytest.raises(ValueError):
        agent.act(np.zeros(39, np.float32), 7)


def test_only_sampled_tasks_temperatures_move():
    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    buf = _buffer(tasks=(1, 3))
    before = agent.log_alpha.detach().clone()
    rng = np.random.default_rng(0)
    for step in range(3):
        agent.update(buf.sample(64, rng))
    moved = (agent.log_alpha.detach() != before).numpy()
    assert moved.tolist() == [False, True, False, True, False]


def test_targets_move_by_tau():
    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    tau = agent.sac.tau
    old_target = [p.detach().clone() for p in agent.critic_target.q1.parameters()]
    agent.update(_buffer().sample(64, np.random.default_rng(0)))
    for old, new_t, online in zip(old_target, agent.critic_target.q1.parameters(),
                                  agent.critic.q1.parameters()):
        torch.testing.assert_close(new_t, (1 - tau) * old + tau * online.detach())
    # and the online critic did move, so the check above is not vacuous
    assert any(not torch.equal(o, n) for o, n in zip(old_target, agent.critic.q1.parameters()))


def test_same_seed_same_losses():
    def losses(seed):
        agent = build_agent(_cfg(seed), SHAPES, tuple("abcde"))
        rng = np.random.default_rng(seed)
        buf = _buffer(seed=seed)
        return [{k: float(v) for k, v in agent.update(buf.sample(64, rng)).items()}
                for s in range(4)]

    assert losses(3) == losses(3)
    assert losses(3) != losses(4)


def test_actor_update_trains_trunk_only_and_critic_loss_trains_critic():
    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    actor_before = [p.detach().clone() for p in agent.actor.trunk.parameters()]
    critic_before = [p.detach().clone() for p in agent.critic.parameters()]
    agent.update(_buffer().sample(64, np.random.default_rng(0)))
    assert all(not torch.equal(a, b) for a, b in zip(actor_before, agent.actor.trunk.parameters()))
    assert all(not torch.equal(a, b) for a, b in zip(critic_before, agent.critic.parameters()))


def test_save_load_roundtrip(tmp_path):
    from ptsl.core.persistence import load_agent, save_agent

    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    agent.update(_buffer().sample(64, np.random.default_rng(0)))
    save_agent(agent, tmp_path / "a.pt")
    loaded = load_agent(tmp_path / "a.pt")
    obs = np.random.default_rng(0).normal(size=(5, 39)).astype(np.float32)
    np.testing.assert_array_equal(agent.act(obs, np.arange(5)), loaded.act(obs, np.arange(5)))
    assert loaded.meta["task_names"] == list("abcde")
    with pytest.raises(FileNotFoundError):
        load_agent(tmp_path / "missing.pt")


def test_the_guard_reads_losses_later_and_still_names_the_step_and_value():
    """The update reads nothing back to the host; check_losses (once per episode in the loop)
    names the first step whose loss is not finite or exceeds the reference guard of 1e8."""
    agent = build_agent(_cfg(), SHAPES, tuple("abcde"))
    guard = agent.sac.critic_loss_guard
    buf = _buffer()
    rng = np.random.default_rng(0)
    history = [(s, agent.update(buf.sample(64, rng))) for s in range(3)]
    means = check_losses(history, guard)  # finite: returns the means
    assert set(means) == {"critic_loss", "actor_loss", "alpha_loss", "alpha_mean", "entropy"}
    assert means["critic_loss"] == pytest.approx(np.mean([float(h[1]["critic_loss"]) for h in history]))
    buf.reward[:] = 1e6  # a critic loss far above the guard
    history.append((17, agent.update(buf.sample(64, rng))))
    with pytest.raises(TrainingDiverged, match=r"step 17: critic_loss = .* exceeds the guard 1e\+08"):
        check_losses(history, guard)
    buf.reward[:] = np.nan
    history = history[:3] + [(41, agent.update(buf.sample(64, rng)))]  # no host read, no raise
    with pytest.raises(TrainingDiverged, match="step 41: critic_loss = nan is not finite"):
        check_losses(history, guard)


def test_an_agent_loaded_to_act_builds_no_optimizer(tmp_path):
    """Loading an agent to act or evaluate builds no optimizer; what needs them (an update, a
    resume checkpoint) builds them then. Neither imports torch._dynamo (ptsl.core.agent.optim)."""
    import subprocess
    import sys

    from ptsl.core.persistence import save_agent

    save_agent(build_agent(_cfg(), SHAPES, tuple("abcde")), tmp_path / "model.pt")
    code = ("import sys\n"
            "import numpy as np\n"
            "from ptsl.core.persistence import load_agent\n"
            f"agent = load_agent({str(tmp_path / 'model.pt')!r})\n"
            "agent.act(np.zeros(39, dtype=np.float32), 2)\n"
            "print(agent._optimizers is None)\n"
            "print(sorted(agent.training_state()['optimizers']))\n"
            "print('torch._dynamo' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.splitlines() == ["True", "['actor', 'alpha', 'critic']", "False"], \
        proc.stderr[-2000:]


def _clipped_agent(q_clip: float | None, seed: int = 0):
    cfg = _cfg(seed)
    return build_agent(cfg.model_copy(update={"sac": cfg.sac.model_copy(
        update={"q_clip": q_clip})}), SHAPES, tuple("abcde"))


def test_the_q_clip_bounds_targets_and_predictions_in_the_critic_loss():
    """The published PaCo runs' clip (rainx0r/mtrl f5c121f ``max_q_value``): with rewards far
    above it every TD target is the clip, so the critic loss is each Q's distance to it."""
    agent = _clipped_agent(10.0)
    batch = _buffer().sample(64, np.random.default_rng(0))
    batch.reward[:] = 1e4
    with torch.no_grad():
        task = agent.task_index(batch.task, agent.num_tasks)
        q1, q2 = agent.critic(batch.obs, batch.action, task, None)
    assert q1.abs().max() < 10 and q2.abs().max() < 10  # predictions inside: no clip on them
    want = ((q1 - 10) ** 2).mean() + ((q2 - 10) ** 2).mean()
    torch.testing.assert_close(agent.update(batch)["critic_loss"], want)
    unclipped = _clipped_agent(None).update(batch)["critic_loss"]
    assert unclipped > 1e7  # the same batch without the clip: targets near 1e4


def test_a_q_clip_that_never_binds_changes_no_bit_and_none_is_the_default():
    assert SACConfig().q_clip is None
    rng = np.random.default_rng(1)
    batches = [_buffer().sample(64, rng) for _ in range(3)]
    runs = [[agent.update(b) for b in batches] for agent in (_clipped_agent(None),
                                                             _clipped_agent(1e30))]
    for a, b in zip(*runs):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_every_method_of_the_registry_has_a_builder_and_no_more():
    """The registry (which imports nothing of the agent) and the builders' table name the same
    methods, each builder the function of the method's name."""
    from ptsl.core.agent import builders
    from ptsl.core.methods import METHODS

    assert set(builders.BUILDERS) == set(METHODS)
    assert all(fn is getattr(builders, name) for name, fn in builders.BUILDERS.items())
