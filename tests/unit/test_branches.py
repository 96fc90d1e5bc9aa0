"""The task branches measured (ptsl.core.branches) and their records (ptsl.core.branch_records):
dead branches measure exactly 0, a known task weight gives the hand-computed ratio, zeroing the
task branches leaves exactly the shared path and puts every weight back, the intact and zeroed
runs play the evaluate stage's episodes, and the records read back byte for byte or are refused
in one line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.branch_records import (MEAN_TASK, NORM_COLUMNS as COLUMNS, NORMS_FILE,
                                      ZEROED_COLUMNS, ZEROED_FILE, read_branch_records,
                                      write_branch_records)
from ptsl.core.branches import (Observations, measure_branches, measure_observations, ratio,
                                zeroed_task_branches)
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.envs import load_tasks
from ptsl.core.errors import CorruptFileError
from ptsl.core.evaluation import evaluate, evaluator

from ..helpers import random_batch

TASKS = ("a-v3", "b-v3", "c-v3")


def _agent(method: str, shared: bool = True, hidden: int = 16, pal: int = 4):
    exp = ExperimentConfig(benchmark="mt10", method=method, hidden_dim=hidden, num_layers=2,
                           pal_dim=pal, shared_projection=shared)
    cfg = RunConfig(name="tiny", seed=0, experiment=exp, env=EnvConfig(), sac=SACConfig(),
                    train=TrainConfig(steps=1, eval_every=1, checkpoint_every=1))
    table = np.random.default_rng(0).normal(size=(3, 768)).astype(np.float32)
    return build_agent(cfg, Shapes(12, 4, 3), TASKS, task_embeddings=table), cfg


def _observations(n: int = 30, seed: int = 0) -> Observations:
    rng = np.random.default_rng(seed)
    return Observations(obs=rng.normal(size=(n, 12)).astype(np.float32),
                        task=np.arange(n) % 3,
                        action=rng.uniform(-1, 1, size=(n, 4)).astype(np.float32))


def _row(frame, network: str, layer: int, task: str):
    rows = frame[(frame["network"] == network) & (frame["layer"] == layer)
                 & (frame["task"] == task)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_dead_branches_measure_exactly_zero():
    """Reference Q9 with independent projections, after real SAC updates: the output layer
    (no up-projection) has learned its own D, so its branch is alive, while every hidden
    layer's zero D and U keep theirs at exactly 0.0: no NaN, ratio 0.0, in the actor and both
    Q's."""
    agent, cfg = _agent("care_ptsl", shared=False, hidden=32, pal=8)
    for step in range(5):
        agent.update(random_batch(n=96, seed=step))
    frame = measure_observations(agent, _observations(), cfg)
    assert list(frame.columns) == list(COLUMNS)
    assert set(frame["network"]) == {"actor.trunk", "critic.q1", "critic.q2"}
    last = len(agent.actor.trunk.layers) - 1
    hidden = frame[frame["layer"] < last]
    assert len(hidden) == 3 * last * 4  # networks x hidden layers x (3 tasks + the mean)
    assert (hidden["task_output_norm"] == 0.0).all() and (hidden["ratio"] == 0.0).all()
    assert (hidden["down_norm"] == 0.0).all() and (hidden["up_norm"] == 0.0).all()
    assert (hidden["shared_output_norm"] > 0).all()
    output = frame[frame["layer"] == last]
    assert (output["task_output_norm"] > 0).all() and (output["ratio"] > 0).all()
    assert output["up_norm"].isna().all() and (output["up"] == "none").all()
    assert (output["down_norm"] > 0).all() and (output["task_bias_norm"] > 0).all()
    assert not frame.drop(columns=["down_norm", "up_norm"]).isna().any().any()


def test_a_zero_shared_path_gives_a_defined_ratio():
    agent, cfg = _agent("care_ptsl")
    layer = agent.actor.trunk.layers[0]
    with torch.no_grad():
        layer.shared.weight.zero_()
        layer.shared.bias.zero_()
    dead = _row(measure_observations(agent, _observations(), cfg), "actor.trunk", 0, MEAN_TASK)
    assert dead["shared_output_norm"] == 0.0 and dead["ratio"] == 0.0  # 0/0: a dead branch
    with torch.no_grad():
        layer.task_bias.fill_(1.0)  # c_t through the shared U, once U is nonzero
        layer.up.weight.fill_(0.5)
    alive = _row(measure_observations(agent, _observations(), cfg), "actor.trunk", 0, MEAN_TASK)
    assert alive["task_output_norm"] > 0 and alive["ratio"] == math.inf
    assert ratio(0.0, 0.0) == 0.0 and ratio(2.0, 4.0) == 0.5 and math.isnan(ratio(math.nan, 1.0))


def _by_hand(x, s, b, d, w, c, u):
    """One PTSL layer's two parts for rows ``x`` of one task, in float64: mean norms and their
    ratio."""
    shared = x @ s.T + b
    branch = ((x @ d.T) @ w + c) @ u.T
    a, z = np.linalg.norm(branch, axis=1).mean(), np.linalg.norm(shared, axis=1).mean()
    return a, z, a / z


@pytest.mark.parametrize("network", ["actor.trunk", "critic.q1"])
def test_ratio_matches_a_hand_computation(network):
    """MT-SAC+PTSL (the observation itself, and the action for a Q, enter layer 0): after
    setting D, U, the shared bias and task 1's W_t and c_t to known values, layer 0's measured
    norms and ratio for task 1 are the formula's, computed apart in float64; the other tasks'
    rows differ."""
    agent, cfg = _agent("sac_ptsl")
    trunk = agent.actor.trunk if network == "actor.trunk" else agent.critic.q1
    layer = trunk.layers[0]
    gen = torch.Generator().manual_seed(7)
    start = layer.task_weight[1].detach().double().numpy().copy()
    with torch.no_grad():
        layer.down.weight.copy_(torch.randn(layer.down.weight.shape, generator=gen))
        layer.up.weight.copy_(0.3 * torch.randn(layer.up.weight.shape, generator=gen))
        layer.task_weight[1].copy_(torch.arange(16.0).view(4, 4) / 8 - 1)
        layer.task_bias[1].copy_(torch.tensor([0.5, -1.0, 2.0, 0.0]))
        layer.shared.bias.copy_(torch.randn(layer.shared.bias.shape, generator=gen))
    obs = _observations(n=31, seed=2)
    frame = measure_observations(agent, obs, cfg)
    rows = obs.task == 1
    x = obs.obs[rows] if network == "actor.trunk" else np.hstack([obs.obs, obs.action])[rows]
    p = {k: v.detach().double().numpy() for k, v in layer.named_parameters()}
    want = _by_hand(x.astype(np.float64), p["shared.weight"], p["shared.bias"], p["down.weight"],
                    p["task_weight"][1], p["task_bias"][1], p["up.weight"])
    got = _row(frame, network, 0, "b-v3")
    assert got["observations"] == rows.sum() == 10
    np.testing.assert_allclose([got["task_output_norm"], got["shared_output_norm"],
                                got["ratio"]], want, rtol=1e-5)
    assert got["task_weight_norm"] == pytest.approx(np.linalg.norm(p["task_weight"][1]))
    # Its initialisation is rebuilt from the run's seed: only task 1's W_t moved.
    assert got["task_weight_change"] == pytest.approx(np.linalg.norm(p["task_weight"][1] - start))
    assert got["down"] == "own" and got["up"] == "shared"
    other = _row(frame, network, 0, "a-v3")
    assert abs(other["ratio"] - got["ratio"]) > 1e-3 and other["task_weight_change"] == 0.0
    mean = _row(frame, network, 0, MEAN_TASK)
    per_task = frame[(frame["network"] == network) & (frame["layer"] == 0)
                     & (frame["task"] != MEAN_TASK)]
    assert mean["ratio"] == pytest.approx(per_task["task_output_norm"].mean()
                                          / per_task["shared_output_norm"].mean())


def _shared_path(net, x: torch.Tensor) -> torch.Tensor:
    """The shared path alone, ``act(S x + b)`` layer after layer, with the product the layer
    computes ``S x + b`` by (one over ``[S; D]`` where it projects down), so its bits are the
    ones the layer adds its task branch to."""
    for layer in net.layers:
        if layer.down is not None:
            weight = torch.cat([layer.shared.weight, layer.down.weight])
            bias = torch.cat([layer.shared.bias, layer.shared.bias.new_zeros(
                layer.down.out_features)])
            x = torch.addmm(bias, x, weight.t())[:, :layer.shared.out_features]
        else:
            x = F.linear(x, layer.shared.weight, layer.shared.bias)
        x = torch.relu(x) if layer.activation else x
    return x


def _alive(agent) -> None:
    """Every projection, task bias and residual weight of every PTSL layer set nonzero, so that
    every task branch adds to its layer's output."""
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in agent.named_parameters():
            if name.split(".")[-2:-1] in (["down"], ["up"], ["project"]) or \
                    name.endswith(("task_bias", "mix.alpha")):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))


@pytest.mark.parametrize("method, options", [
    ("care_ptsl", {"shared_projection": False}),
    ("sac_ptsl", {}),
    ("care_ptsl", {"residual_mode": "project"}),
])
def test_zeroing_leaves_exactly_the_shared_path_and_puts_every_weight_back(method, options):
    exp = ExperimentConfig(benchmark="mt10", method=method, hidden_dim=32, num_layers=2,
                           pal_dim=4, **options)
    cfg = RunConfig(name="tiny", seed=0, experiment=exp, env=EnvConfig(), sac=SACConfig(),
                    train=TrainConfig(steps=1, eval_every=1, checkpoint_every=1))
    table = np.random.default_rng(0).normal(size=(3, 768)).astype(np.float32)
    agent = build_agent(cfg, Shapes(12, 4, 3), TASKS, task_embeddings=table)
    _alive(agent)
    before = {k: v.clone() for k, v in agent.state_dict().items()}
    task = agent.task_index(torch.arange(30) % 3, 3)
    for net in (agent.actor.trunk, agent.critic.q1):
        x = torch.randn(30, net.layers[0].shared.in_features,
                        generator=torch.Generator().manual_seed(1))
        lows: list[torch.Tensor] = []
        hooks = [layer.register_forward_hook(lambda m, a, out: lows.append(out.y_low))
                 for layer in net.layers]
        with torch.no_grad():
            intact = net(x, task)
            lows.clear()
            with zeroed_task_branches(agent):
                zeroed = net(x, task)
            after = net(x, task)
        for hook in hooks:
            hook.remove()
        assert len(lows) == 2 * len(net.layers)
        assert all(torch.count_nonzero(low) == 0 for low in lows[:len(net.layers)])
        assert torch.equal(zeroed, _shared_path(net, x))  # bit for bit
        assert not torch.equal(zeroed, intact)  # the branches were alive: zeroing is no no-op
        assert torch.equal(after, intact)
    assert all(torch.equal(v, before[k]) for k, v in agent.state_dict().items())
    with pytest.raises(RuntimeError, match="inside"):
        with zeroed_task_branches(agent):
            raise RuntimeError("inside")
    assert all(torch.equal(v, before[k]) for k, v in agent.state_dict().items())


def test_zeroing_an_agent_without_ptsl_layers_is_refused():
    exp = ExperimentConfig(benchmark="mt10", method="mtsac", hidden_dim=16, num_layers=2)
    cfg = RunConfig(name="tiny", seed=0, experiment=exp, env=EnvConfig(), sac=SACConfig(),
                    train=TrainConfig(steps=1, eval_every=1, checkpoint_every=1))
    agent = build_agent(cfg, Shapes(12, 4, 3), TASKS)
    with pytest.raises(ValueError, match="no PTSL layer"):
        with zeroed_task_branches(agent):
            pass


def test_intact_and_zeroed_run_the_evaluate_stages_episodes(task_cache):
    """The evaluate stage's numbers come out intact; zeroing dead branches changes no return
    (the same episodes: any other initial state or goal would change them); zeroing live ones
    changes what the agent does, and leaves the agent as it was."""
    from ptsl.core.benchmarks import ACTION_DIM, OBS_DIM

    exp = ExperimentConfig(benchmark="mt10", method="sac_ptsl", hidden_dim=16, num_layers=2,
                           pal_dim=4)
    cfg = RunConfig(name="tiny", seed=1, experiment=exp, env=EnvConfig(episode_length=10),
                    sac=SACConfig(), train=TrainConfig(steps=10, eval_every=10,
                                                       checkpoint_every=10))
    tasks = load_tasks("mt10", 1, task_cache)
    agent = build_agent(cfg, Shapes(OBS_DIM, ACTION_DIM, tasks.num_tasks), tasks.names)
    norms, zeroed = measure_branches(agent, cfg, tasks, episodes=2)  # fresh: dead branches
    assert list(zeroed.columns) == list(ZEROED_COLUMNS)
    assert list(zeroed["task"]) == list(tasks.names)
    assert (zeroed["zeroed_return"] == zeroed["intact_return"]).all()
    assert (zeroed["zeroed_success"] == zeroed["intact_success"]).all()
    assert (norms.loc[norms["task"] != MEAN_TASK, "observations"] == 2 * 10).all()
    assert (norms["task_output_norm"] == 0.0).all()

    _alive(agent)
    before = {k: v.clone() for k, v in agent.state_dict().items()}
    norms, zeroed = measure_branches(agent, cfg, tasks, episodes=2)
    env = evaluator(tasks, cfg.env, cfg.seed)
    try:
        stage = evaluate(agent, env, 2)  # as the evaluate stage computes it
    finally:
        env.close()
    assert zeroed["intact_success"].tolist() == stage.success.tolist()
    assert zeroed["intact_return"].tolist() == stage.returns.tolist()
    # (the first task's v1 reward is 0 on these ten steps either way)
    assert (zeroed["zeroed_return"] != zeroed["intact_return"]).sum() >= 5
    assert (norms["task_output_norm"] > 0).all()
    assert all(torch.equal(v, before[k]) for k, v in agent.state_dict().items())
    again = measure_branches(agent, cfg, tasks, episodes=2)
    assert again[0].to_csv() == norms.to_csv() and again[1].to_csv() == zeroed.to_csv()


def _zeroed_frame(run: str = "tiny-0", success: float = 0.5) -> pd.DataFrame:
    return pd.DataFrame([{"run": run, "experiment": "tiny", "seed": 0, "method": "sac_ptsl",
                          "task": t, "episodes": 1, "intact_success": success,
                          "zeroed_success": 0.0, "intact_return": 1.0 / 3, "zeroed_return": 2.0}
                         for t in TASKS], columns=list(ZEROED_COLUMNS))


def test_records_read_back_byte_for_byte_and_a_bad_one_is_refused(tmp_path):
    agent, cfg = _agent("sac_ptsl")
    _alive(agent)
    norms = measure_observations(agent, _observations(), cfg)
    write_branch_records(tmp_path / "a", norms, _zeroed_frame())
    read_norms, read_zeroed = read_branch_records(tmp_path / "a", "tiny", 0)
    write_branch_records(tmp_path / "b", read_norms, read_zeroed)
    for name in (NORMS_FILE, ZEROED_FILE):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    with pytest.raises(CorruptFileError, match="not only of 'other' seed 0"):
        read_branch_records(tmp_path / "a", "other", 0)
    with pytest.raises(ValueError, match="expected columns"):
        write_branch_records(tmp_path / "c", norms.drop(columns=["ratio"]), _zeroed_frame())
    assert not (tmp_path / "c").exists()
    write_branch_records(tmp_path / "d", norms, _zeroed_frame(success=1.5))
    with pytest.raises(CorruptFileError, match=r"zeroed.csv: task-branch zeroing result is "
                                               r"unreadable \(intact_success: every value"):
        read_branch_records(tmp_path / "d", "tiny", 0)
    path = tmp_path / "a" / ZEROED_FILE
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(CorruptFileError, match="truncated"):
        read_branch_records(tmp_path / "a", "tiny", 0)
    (tmp_path / "a" / NORMS_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'a' / NORMS_FILE} is missing"):
        read_branch_records(tmp_path / "a", "tiny", 0)
