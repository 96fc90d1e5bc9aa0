"""The Python API (ptsl.api): same numbers as the DVC stage, the pipeline's defaults and errors,
and a package that loads the API only when it is used."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import ptsl
from ptsl import (BUDGETS, ConfigError, RunConfig, config_from_params, evaluate, load_agent,
                  make_config, make_env, train)
from ptsl.core.config import EnvConfig, SACConfig

from ..conftest import ROOT
from ..pipeline_project import dvc, make_project

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                              "num_layers": 2, "label": "Tiny MT-SAC"}}


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """A tiny project after `dvc repro evaluate@tiny_mtsac-1` (check_env, train, evaluate)."""
    root = make_project(tmp_path_factory.mktemp("api_project"), EXPERIMENTS, seeds=[1])
    dvc(root, "repro", "evaluate@tiny_mtsac-1", env_extra={"PTSL_TRACKING": "off"})
    return root


def test_api_run_gives_the_stage_curve_byte_for_byte(staged, tmp_path, task_cache):
    cfg = config_from_params("tiny_mtsac", 1, params=staged / "params.yaml")
    result = train(cfg, progress=False, task_cache=task_cache)
    # Written the way the stage writes it (ptsl.core.loop.write_outputs).
    result.curve.to_csv(tmp_path / "curve.csv", index=False)
    stage_curve = (staged / "data" / "runs" / "tiny_mtsac-1" / "curve.csv").read_bytes()
    assert (tmp_path / "curve.csv").read_bytes() == stage_curve
    assert result.curve["step"].tolist() == [0, 20, 40]


def test_api_resume_ends_with_the_stage_curve(staged, tmp_path, task_cache):
    cfg = config_from_params("tiny_mtsac", 1, params=staged / "params.yaml")
    seen = []

    def stop_at_20(row):
        seen.append(row["step"])
        if row["step"] == 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, progress=False, task_cache=task_cache, resume_dir=tmp_path / "resume",
              callback=stop_at_20)
    assert seen == [0, 20]
    result = train(cfg, progress=False, task_cache=task_cache, resume_dir=tmp_path / "resume")
    assert result.resumed_from == 20
    result.curve.to_csv(tmp_path / "curve.csv", index=False)
    assert (tmp_path / "curve.csv").read_bytes() == \
        (staged / "data" / "runs" / "tiny_mtsac-1" / "curve.csv").read_bytes()
    assert not list((tmp_path / "resume").iterdir())


def test_api_evaluate_gives_the_evaluate_stage_numbers(staged, task_cache):
    agent = load_agent(staged / "data" / "runs" / "tiny_mtsac-1" / "model.pt")
    record = json.loads((staged / "data" / "eval" / "tiny_mtsac-1.json").read_text())
    scores = evaluate(agent, task_cache=task_cache)
    assert scores.success == record["per_task"]
    assert scores.mean_success == record["success"]
    assert scores.mean_return == record["return"]
    assert scores.episodes == 1 and set(scores.returns) == {"reach-v3"}


def test_make_env_and_predict(staged, task_cache):
    agent = load_agent(staged / "data" / "runs" / "tiny_mtsac-1" / "model.pt")
    env = make_env("reach-v3", seed=1, env={"episode_length": 20}, evaluation=True,
                   task_cache=task_cache)
    try:
        obs = env.reset()
        assert obs.shape == (1, 39) and env.tasks.names == ("reach-v3",)
        action = agent.predict(obs, env.task_ids)
        np.testing.assert_array_equal(action, agent.act(obs, env.task_ids))
        assert action.shape == (1, 4) and np.all(np.abs(action) <= 1)
        # The same environment, handed to evaluate, gives what env=None gives for this agent.
        assert evaluate(agent, env).success == evaluate(agent, task_cache=task_cache).success
    finally:
        env.close()


def test_evaluate_records_rollout_videos_where_mujoco_renders(staged, tmp_path, task_cache):
    from PIL import Image

    from ptsl.core import rollouts as rec

    if rec.find_backend() is None:
        pytest.skip(rec.no_backend_message())
    agent = load_agent(staged / "data" / "runs" / "tiny_mtsac-1" / "model.pt")
    scores = evaluate(agent, task_cache=task_cache, videos=tmp_path / "videos")
    assert scores.success == evaluate(agent, task_cache=task_cache).success  # same numbers
    gif = scores.videos["reach-v3"]
    assert gif == tmp_path / "videos" / "reach-v3.gif"
    with Image.open(gif) as im:
        assert im.n_frames > 2
        frame = np.asarray(im.convert("RGB"))
    assert frame.std() > 5  # a rendered scene, not a blank frame


def test_make_config_defaults_are_params_yaml(raw_params):
    assert {k: dict(v) for k, v in BUDGETS.items()} == raw_params["budgets"]
    small = make_config("mtsac", "mt10")
    sac = {**raw_params["sac"], **{k.split(".")[1]: v for k, v in BUDGETS["small"].items()
                                   if k.startswith("sac.")}}
    assert small.sac.model_dump() == pytest.approx(sac)
    assert small.env == EnvConfig(**raw_params["env"])  # a key params.yaml omits: its default
    assert (small.train.steps, small.train.eval_every, small.sac.batch_size) == (300, 150, 128)
    paper = make_config("care", "mt50", budget="paper")
    assert (paper.train.steps, paper.train.eval_every, paper.sac.batch_size,
            paper.sac.init_steps) == (200_000, 10_000, 1280, 1500)
    assert (paper.experiment.hidden_dim, paper.experiment.num_layers) == (400, 3)


def test_make_config_is_the_pipeline_config_for_the_same_settings():
    """A params.yaml experiment rebuilt from keyword arguments resolves to the stage's config."""
    stage = config_from_params("mt10_care_ptsl", 2, params=ROOT / "params.yaml")
    mine = make_config("care_ptsl", "mt10", seed=2, hidden_dim=326, num_layers=3)
    assert mine.experiment.pal_dim == 50  # the top-level pal_dim, as the stage reads it
    keep = dict(name=stage.name, experiment=mine.experiment.model_copy(update=dict(
        name=stage.experiment.name, matches=stage.experiment.matches,
        long=stage.experiment.long, label=stage.experiment.label)))
    # long_steps is inert in a run that is not long (a stage's short seed keeps the table's
    # long step there; make_config's one run sets it to its own steps).
    keep["train"] = mine.train.model_copy(update={"long_steps": stage.train.long_steps})
    assert mine.model_copy(update=keep) == stage
    custom = make_config("care_ptsl", "mt10", pal_dim=16, residual_mode="sum")
    assert (custom.experiment.pal_dim, custom.experiment.residual_mode) == (16, "sum")
    over = make_config("mtsac", "reach-v3", env=EnvConfig(episode_length=20),
                       sac={"tau": 0.01}, steps=40, eval_every=20, batch_size=8)
    assert (over.env.episode_length, over.sac.tau, over.sac.batch_size, over.train.steps) == \
        (20, 0.01, 8, 40)
    assert isinstance(over, RunConfig) and over.sac.discount == SACConfig().discount


def test_make_config_builds_every_method_and_protocol():
    """The field's baselines as the paper's methods, and Meta-World+'s protocol from
    params.yaml's preset (an explicit argument still wins)."""
    mh = make_config("mhsac", "mt10", hidden_dim=64, task_onehot=True)
    assert (mh.experiment.method, mh.experiment.task_onehot) == ("mhsac", True)
    moore = make_config("moore", "mt50", num_experts=6)
    assert (moore.experiment.num_experts, moore.experiment.hidden_dim) == (6, 400)
    plus = make_config("mtsac", "mt10", protocol="metaworld-plus")
    assert (plus.env.episode_length, plus.env.goals, plus.env.reward_version,
            plus.env.normalize_reward, plus.train.eval_episodes) == (500, "resample", "v2",
                                                                     False, 50)
    mine = make_config("mtsac", "mt10", protocol="metaworld-plus", eval_episodes=5,
                       env={"episode_length": 200})
    assert (mine.env.episode_length, mine.env.goals, mine.train.eval_episodes) == \
        (200, "resample", 5)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "sacx"},
     "method: unknown value 'sacx'; allowed: mtsac, softmod, care, care_ptsl, sac_ptsl, mhsac, "
     "moore, paco"),
    ({"benchmark": "mt11"}, "benchmark: unknown benchmark 'mt11'; allowed: mt10, mt50 or a "
                            "Meta-World v3 task name such as reach-v3"),
    ({"hidden_dim": 0}, "hidden_dim: must be >= 1, got 0"),
    ({"num_layers": 2.5}, "num_layers: expected an integer, got 2.5"),
    ({"budget": "huge"}, "budget: unknown budget 'huge'; allowed: small, paper"),
    ({"steps": 100}, "steps: must be a multiple of eval_every (150) so that the reported step "
                     "is evaluated"),
    ({"batch_size": -1}, "batch_size: must be >= 1, got -1"),
    ({"pal_dim": 16}, "pal_dim: only methods care_ptsl, sac_ptsl read it; remove it "
                      "from mtsac experiments"),
    ({"num_experts": 2}, "num_experts: only methods softmod, care, care_ptsl, moore read it; "
                         "remove it from mtsac experiments"),
    ({"protocol": "plus"}, "protocol: unknown protocol 'plus'; allowed: reference, "
                           "metaworld-plus"),
    ({"method": "moore", "hidden_dim": 3}, "make_config: MOORE cannot make 4 expert outputs "
                                           "orthonormal in 3 dimensions; use num_experts <= "
                                           "hidden_dim"),
    ({"method": "care_ptsl", "residual_mode": "weird"},
     "residual_mode: unknown value 'weird'; allowed: none, sum, linear, project"),
    ({"env": {"goals": "x"}}, "env.goals: unknown value 'x'; allowed: fixed, resample"),
    ({"env": {"foo": 1}}, "env.foo: unknown key; allowed: episode_length, goals, "
                          "reward_version, normalize_reward, reward_alpha, "
                          "eval_ends_at_success, observation"),
    ({"sac": {"tau": 2}}, "sac.tau: must be <= 1.0, got 2"),
    ({"sac": 3}, "sac: expected a SACConfig or a mapping of its keys, got 3"),
    ({"seed": -1}, "seed: expected an integer >= 0, got -1"),
])
def test_make_config_errors_name_the_argument(kwargs, message):
    with pytest.raises(ConfigError) as info:
        make_config(**kwargs)
    assert str(info.value) == message


def test_other_errors_are_the_pipelines(tmp_path, task_cache):
    with pytest.raises(ConfigError, match=r"^experiment: unknown experiment 'nope'; allowed: "
                                          r"mt10_mtsac, "):
        config_from_params("nope", 1, params=ROOT / "params.yaml")
    with pytest.raises(ConfigError, match=r"params\.yaml: params file not found$"):
        config_from_params("mt10_mtsac", 1, params=tmp_path / "params.yaml")
    with pytest.raises(ConfigError, match=r"^benchmark: unknown benchmark 'mt5'"):
        make_env("mt5")
    with pytest.raises(ConfigError, match=r"^vector: unknown mode 'gpu'; allowed: sync, async$"):
        make_env("reach-v3", vector="gpu", task_cache=task_cache)
    with pytest.raises(ConfigError, match=r"^env\.vector: unknown key"):
        make_env("reach-v3", env={"vector": "async"}, task_cache=task_cache)
    with pytest.raises(ConfigError, match=r"^config: expected a RunConfig"):
        train({"method": "mtsac"})
    cfg = make_config("mtsac", "reach-v3", hidden_dim=8, num_layers=1, steps=20, eval_every=20,
                      batch_size=4, init_steps=10, env={"episode_length": 10})
    agent = train(cfg, progress=False, task_cache=task_cache).agent
    with pytest.raises(ConfigError, match=r"^agent: expected a MultiTaskSAC"):
        evaluate("model.pt")
    with pytest.raises(ConfigError, match=r"^episodes: must be >= 1, got 0$"):
        evaluate(agent, episodes=0)
    with pytest.raises(ConfigError, match=r"^env: the agent was trained on reach-v3; the "
                                          r"environment has push-v3$"):
        evaluate(agent, "push-v3", task_cache=task_cache)


def test_stages_never_load_the_api():
    """``import ptsl`` loads no torch, no stage script imports ptsl.api (so editing it re-runs
    nothing), and the API's names are functions, not modules of the same name."""
    code = (
        "import importlib.util, sys, pathlib\n"
        "import ptsl\n"
        "assert 'torch' not in sys.modules, 'import ptsl loaded torch'\n"
        "for p in sorted(pathlib.Path('pipeline').glob('*.py')):\n"
        "    spec = importlib.util.spec_from_file_location('stage_' + p.stem, p)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "assert 'ptsl.api' not in sys.modules, 'a stage imports ptsl.api'\n"
        "assert callable(ptsl.train) and ptsl.train.__module__ == 'ptsl.api'\n"
        "assert ptsl.evaluate.__module__ == 'ptsl.api'\n"
        "assert importlib.util.find_spec('ptsl.train') is None\n"
        "assert importlib.util.find_spec('ptsl.evaluate') is None\n"
        "from ptsl.core.loop import TrainResult\n"
        "assert ptsl.TrainResult is TrainResult\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_public_names_are_documented():
    assert set(ptsl.__all__) >= {"make_env", "make_config", "config_from_params", "train",
                                 "evaluate", "load_agent"}
    for name in set(ptsl.__all__) - {"BUDGETS"}:  # a constant: documented by its comment
        assert getattr(ptsl, name).__doc__, name
    from ptsl.core.agent.sac import MultiTaskSAC

    assert "familiar name" in MultiTaskSAC.predict.__doc__
