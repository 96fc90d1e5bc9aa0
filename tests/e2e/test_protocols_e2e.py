"""Both protocols end to end at the small budget's steps: real Meta-World, real DVC. The
reference protocol (150-step episodes, fixed goals, v1 rewards, one deterministic evaluation
episode), then the protocol switch's own command turns the project to Meta-World+'s (500-step
episodes, goals resampled every episode, V2 rewards, no normalisation, evaluation one episode per
goal, 50 per task, each ending at success, at every second evaluation point) and `dvc repro`
retrains under it."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import yaml

from ..pipeline_project import dvc, env_for, make_project

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                              "num_layers": 2, "label": "Tiny MT-SAC"}}
# What the protocols do to training and evaluation is under test here, not MLflow (its runs are
# tests/e2e/test_pipeline_e2e.py's): tracking off saves each stage process MLflow's start-up.
NO_TRACKING = {"PTSL_TRACKING": "off"}


def _set(project, **updates) -> None:
    """Set dotted keys of the project's params.yaml."""
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    for dotted, value in updates.items():
        *parents, leaf = dotted.split(".")
        node = params
        for part in parents:
            node = node[part]
        node[leaf] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("protocols"), EXPERIMENTS, seeds=[1],
                        long_steps=300)
    # The small budget's steps; the reference protocol's keys exactly.
    _set(root, protocol="reference", **{"env.episode_length": 150, "train.steps": 300,
                                        "train.long_steps": 300, "train.eval_every": 150,
                                        "train.checkpoint_every": 300})
    return root


def _curve(project) -> pd.DataFrame:
    return pd.read_csv(project / "data" / "runs" / "tiny_mtsac-1" / "curve.csv")


def test_reference_then_metaworld_plus(project):
    dvc(project, "repro", env_extra=NO_TRACKING)
    curve = _curve(project)
    assert curve["step"].tolist() == [0, 150, 300]
    assert curve["train_episodes"].tolist() == [0, 1, 1]  # one 150-step episode per window
    results = (project / "reports" / "results.md").read_text()
    assert "protocol `reference`" in results

    proc = subprocess.run([sys.executable, "-m", "ptsl.ops.protocol", "metaworld-plus"],
                          cwd=project, env=env_for(project), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["protocol"] == "metaworld-plus"
    assert (params["env"]["episode_length"], params["env"]["goals"],
            params["env"]["reward_version"], params["env"]["normalize_reward"],
            params["train"]["eval_episodes"], params["evaluate"]["episodes"]) == \
        (500, "resample", "v2", False, 50, 50)
    assert (params["env"]["eval_ends_at_success"], params["train"]["eval_stride"]) == (True, 2)
    # One 500-step episode, evaluated before and after it (every second multiple of 250). The
    # preset's 50 evaluation episodes are checked above; here 5 of them (one per goal, each up to
    # 500 steps) exercise the same evaluation at a tenth of its 75,000 environment steps, which
    # makes the protocol one of the project's own (`custom`: validate refuses a preset's name on
    # keys that differ from it).
    _set(project, **{"protocol": "custom", "train.steps": 500, "train.long_steps": 500,
                     "train.eval_every": 250, "train.checkpoint_every": 500,
                     "train.eval_episodes": 5, "evaluate.episodes": 5})
    out = dvc(project, "repro", env_extra=NO_TRACKING).stdout
    assert "Running stage 'train@tiny_mtsac-1'" in out  # the environment keys changed
    curve = _curve(project)
    assert curve["step"].tolist() == [0, 500]
    assert curve["train_episodes"].tolist() == [0, 1]
    # 5 evaluation episodes, one per goal: rates in fifths.
    assert ((curve["success"] * 5).round(6) % 1 == 0).all()
    results = (project / "reports" / "results.md").read_text()
    assert "protocol `custom`" in results
    assert "each evaluation episode ending at success, evaluated every 500 vector steps" in results
    evaluation = yaml.safe_load((project / "data" / "eval" / "tiny_mtsac-1.json").read_text())
    assert evaluation["episodes"] == 5
