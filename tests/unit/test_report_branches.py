"""The task branches measured (ptsl.report.branches): dead branches measure exactly 0, a known
task weight gives the hand-computed ratio, the writer is deterministic and skips non-PTSL rows,
and the command's bad input is one line."""

from __future__ import annotations

import copy
import math
import shutil

import numpy as np
import pytest
import torch

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.persistence import save_agent
from ptsl.ops.params import parse_params, run_config
from ptsl.report.branches import (COLUMNS, MEAN_TASK, Observations, main, measure_observations,
                                  ratio, write_branches)

from ..conftest import ROOT
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


def _tiny_params(tmp_path):
    """The project's params reduced to a PTSL and a plain row on reach-v3, 10-step episodes."""
    from ptsl.ops.params import read_yaml

    raw = copy.deepcopy(read_yaml(ROOT / "params.yaml"))
    raw["experiments"] = {
        "tiny_ptsl": {"benchmark": "reach-v3", "method": "sac_ptsl", "hidden_dim": 16,
                      "num_layers": 2, "label": "Tiny PTSL"},
        "tiny_plain": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 16,
                       "num_layers": 2}}
    raw["runs"] = {"plain": ["tiny_plain"], "ptsl": ["tiny_ptsl"]}
    raw["tables"] = {"t": {"title": "tiny", "rows": ["tiny_plain", "tiny_ptsl"]}}
    raw["pal_dim"], raw["seeds"], raw["long_seeds"] = 4, [1, 2], [1]
    raw["env"]["episode_length"], raw["protocol"] = 10, "custom"
    return parse_params(raw, check_presets=False)


def test_writer_measures_ptsl_runs_only_and_gives_the_same_bytes(tmp_path, task_cache):
    params = _tiny_params(tmp_path)
    runs = tmp_path / "data" / "runs"
    assert write_branches(params, runs, tmp_path / "none", task_cache) == {}
    assert not (tmp_path / "none").exists()
    for exp in ("tiny_plain", "tiny_ptsl"):  # seed 2 not trained: skipped, not an error
        save_agent(build_agent(run_config(params, exp, 1), Shapes(39, 4, 1), ("reach-v3",)),
                   runs / f"{exp}-1" / "model.pt")
    first = write_branches(params, runs, tmp_path / "a", task_cache)
    second = write_branches(params, runs, tmp_path / "b", task_cache)
    assert first["csv"] == tmp_path / "a" / "data" / "branches.csv"
    assert first["csv"].read_bytes() == second["csv"].read_bytes()
    assert first["figure"].stat().st_size > 0
    import pandas as pd

    frame = pd.read_csv(first["csv"])
    assert set(frame["run"]) == {"tiny_ptsl-1"}
    assert (frame.loc[frame["task"] == "reach-v3", "observations"] == 10).all()
    # A fresh agent: zero D and U, so every branch is exactly zero, and no W_t has moved.
    assert (frame["task_output_norm"] == 0.0).all() and (frame["ratio"] == 0.0).all()
    assert (frame["task_weight_change"] == 0.0).all() and (frame["task_weight_norm"] > 0).all()


def test_command_bad_input_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    monkeypatch.chdir(ROOT)
    assert main(["--study", "no-such-study", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --study: unknown study "
                                                   "'no-such-study'")
    assert "allowed: " in err and "mt10-cpu" in err
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "params.yaml", project / "params.yaml")
    monkeypatch.chdir(project)
    assert main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trained PTSL run under data/runs" in err
    assert "mt10_care_ptsl" in err and "allowed: " in err
    assert not out.exists()
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "--study" in capsys.readouterr().out


def test_the_aggregate_measures_the_branches_only_where_the_params_ask(tmp_path):
    """``report.branches: true``: the reports carry data/branches.csv, figures/branches.png and
    a section of results.md linking them; false (the default): none of them."""
    import pandas as pd

    from ptsl.ops.paths import PUBLISHED
    from ptsl.report.inputs import RunRecords
    from ptsl.report.published import Published
    from ptsl.report.tables import write_reports

    from .report_data import curve

    params = _tiny_params(tmp_path)
    params = params.model_copy(update={"train": params.train.model_copy(
        update={"steps": params.train.eval_every, "long_steps": params.train.eval_every})})
    runs = tmp_path / "data" / "runs"
    frames = []
    for exp in ("tiny_plain", "tiny_ptsl"):
        for seed in (1, 2):
            save_agent(build_agent(run_config(params, exp, seed), Shapes(39, 4, 1),
                                   ("reach-v3",)), runs / f"{exp}-{seed}" / "model.pt")
            frame = curve([0, params.train.eval_every], lambda s: 1,
                          np.random.default_rng(seed), ["reach-v3"])
            frame.insert(0, "seed", seed)
            frame.insert(0, "experiment", exp)
            frames.append(frame)
    records = RunRecords(evals=pd.DataFrame([{"experiment": "tiny_plain", "parameter_count": 1},
                                             {"experiment": "tiny_ptsl", "parameter_count": 2}]),
                         curves=pd.concat(frames, ignore_index=True))
    pub = Published.load(ROOT / PUBLISHED)
    write_reports(params, records, pub, tmp_path / "off", runs_dir=runs)
    assert not (tmp_path / "off" / "data" / "branches.csv").exists()
    assert "task branches" not in (tmp_path / "off" / "results.md").read_text()
    on = params.model_copy(update={"report": params.report.model_copy(update={"branches": True})})
    write_reports(on, records, pub, tmp_path / "on", runs_dir=runs)
    csv = pd.read_csv(tmp_path / "on" / "data" / "branches.csv")
    assert set(csv["run"]) == {"tiny_ptsl-1", "tiny_ptsl-2"}
    assert (tmp_path / "on" / "figures" / "branches.png").stat().st_size > 0
    assert "](figures/branches.png)" in (tmp_path / "on" / "results.md").read_text()
