"""Every method trains through the DVC pipeline at the tiny test budget (real Meta-World MT10,
real DVC) and appears in the results table; the CARE+PTSL row has every ablation
switch off its default (its own pal_dim, independent projections, the project residual), so a
saved non-default PTSL agent is loaded back by its evaluation stage, and the PTSL row in
runs.ptsl has its task branches recorded (branches_ptsl) and reported. Each variant's update on its
own (one-hot, default and ablated PTSL, every residual mode) is checked in
tests/unit/test_fast_path.py, the default CARE+PTSL training stage in test_thread_count.py and a
PTSL row of each pal_dim kind through DVC in test_ablation_e2e.py; here each row costs two
processes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ptsl.core.config import ExperimentConfig
from ptsl.tools.counting import count_parameters

from ..pipeline_project import dvc, make_project

SMALL = {"benchmark": "mt10", "hidden_dim": 24, "num_layers": 2}
EXPERIMENTS = {
    "t_mtsac_onehot": {**SMALL, "method": "mtsac", "task_onehot": True},
    "t_softmod": {**SMALL, "method": "softmod"},
    "t_care": {**SMALL, "method": "care"},
    "t_care_ptsl": {**SMALL, "method": "care_ptsl", "shared_projection": False,
                    "residual_mode": "project", "pal_dim": 6},
    "t_sac_ptsl": {**SMALL, "method": "sac_ptsl"},
}
PAL_DIM = 8
# The evaluation stages of a PTSL row in the PTSL groups and of one with its own pal_dim in the
# plain groups (their training stages come with them).
TRACKED = ("evaluate_ptsl@t_sac_ptsl-1", "evaluate@t_care_ptsl-1")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    import yaml

    from ..conftest import ROOT

    # The PTSL runs' task branches reported (the studies' setting), from the branches_ptsl
    # stage of the row in runs.ptsl.
    report = {**yaml.safe_load((ROOT / "params.yaml").read_text())["report"],
              "bootstrap_reps": 200, "branches": True}
    root = make_project(tmp_path_factory.mktemp("methods"), EXPERIMENTS, seeds=[1],
                        extra={"pal_dim": PAL_DIM, "report": report})
    # MLflow's runs are under test here only for the stage tags of the two PTSL rows
    # (test_mlflow_runs_name_their_dvc_stage): those stages run tracked, the rest untracked,
    # which saves the other stage processes MLflow's start-up (about 3.7 s of a core each).
    dvc(root, "repro", *TRACKED)
    dvc(root, "repro", env_extra={"PTSL_TRACKING": "off"})
    return root


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_method_trains_evaluates_and_is_reported(project, name):
    summary = json.loads((project / "data" / "runs" / f"{name}-1" / "summary.json").read_text())
    raw = dict(EXPERIMENTS[name])
    if raw["method"] in ("care_ptsl", "sac_ptsl"):
        raw.setdefault("pal_dim", PAL_DIM)
    expected = count_parameters(ExperimentConfig(**raw, name=name), obs_dim=39, action_dim=4,
                                num_tasks=10)
    assert summary["parameter_count"] == expected
    assert summary["final_step"] == 40
    ev = json.loads((project / "data" / "eval" / f"{name}-1.json").read_text())
    assert ev["method"] == raw["method"] and 0.0 <= ev["success"] <= 1.0
    table = pd.read_csv(project / "reports" / "tables" / "short.csv").set_index("experiment")
    assert table.loc[name, "parameters"] == expected
    assert table.loc[name, "seeds"] == 1


def test_unbuildable_combination_fails_at_once_with_one_line(project):
    """A single task never pays for a down-projection, so a residual mode cannot work there.
    The stage reads its own params file (``--params``) in the project above: no second copy of
    the project for one process that fails before any work."""
    import subprocess
    import sys

    import yaml

    from ..conftest import ROOT

    bad = {"benchmark": "reach-v3", "method": "care_ptsl", "hidden_dim": 24, "num_layers": 2,
           "residual_mode": "sum"}
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["experiments"]["bad"] = bad  # in its group, as tests/pipeline_project.py puts a row
    params["runs"]["ptsl" if ExperimentConfig(**bad).reads_pal_dim else "plain"].append("bad")
    (project / "bad.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = subprocess.run([sys.executable, str(ROOT / "pipeline" / "train.py"), "--exp", "bad",
                           "--seed", "1", "--params", "bad.yaml"], cwd=project,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: experiments.bad: residual_mode='sum'")
    # No run folder of its own, nor a temp one: the runs are the pipeline's five.
    assert sorted(p.name for p in (project / "data" / "runs").iterdir()) == sorted(
        f"{name}-1" for name in EXPERIMENTS)


def test_mlflow_runs_name_their_dvc_stage(project):
    """train_ptsl/evaluate_ptsl runs say so; a PTSL experiment with its own pal_dim is in the plain
    groups (t_care_ptsl), so the tag must follow the group, not the method."""
    from mlflow.tracking import MlflowClient

    stages = set(dvc(project, "stage", "list", "--name-only").stdout.split())
    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    tags = {}
    for kind in ("train", "evaluate"):
        exp = client.get_experiment_by_name(kind)
        for run in client.search_runs([exp.experiment_id]):
            tags[(kind, run.info.run_name)] = run.data.tags["dvc_stage"]
    assert len(tags) == 2 * len(TRACKED)
    assert set(tags.values()) <= stages
    assert tags[("train", "t_sac_ptsl-1")] == "train_ptsl@t_sac_ptsl-1"
    assert tags[("evaluate", "t_sac_ptsl-1")] == "evaluate_ptsl@t_sac_ptsl-1"
    assert tags[("train", "t_care_ptsl-1")] == "train@t_care_ptsl-1"
    assert tags[("evaluate", "t_care_ptsl-1")] == "evaluate@t_care_ptsl-1"


def test_a_ptsl_runs_task_branches_are_recorded_on_its_evaluation_episodes(project):
    """The branches_ptsl stage of the row in runs.ptsl: its intact run is the evaluate stage's
    (the same episodes give the same per-task success and mean return), its zeroed run is on
    record beside it, and the aggregate reports both (report.branches)."""
    zeroed = pd.read_csv(project / "data" / "branches" / "t_sac_ptsl-1" / "zeroed.csv")
    ev = json.loads((project / "data" / "eval" / "t_sac_ptsl-1.json").read_text())
    assert dict(zip(zeroed["task"], zeroed["intact_success"])) == ev["per_task"]
    assert zeroed["intact_return"].mean() == pytest.approx(ev["return"], rel=1e-12)
    assert zeroed["zeroed_success"].between(0, 1).all() and len(zeroed) == 10
    norms = pd.read_csv(project / "data" / "branches" / "t_sac_ptsl-1" / "branches.csv")
    assert set(norms["network"]) == {"actor.trunk", "critic.q1", "critic.q2"}
    assert (norms.loc[norms["task"] != "mean", "observations"] == 20).all()  # 20-step episodes
    # Only the row in runs.ptsl has the stage (t_care_ptsl, with its own pal_dim, is plain).
    assert sorted(p.name for p in (project / "data" / "branches").iterdir()
                  if not p.name.startswith(".")) == ["t_sac_ptsl-1"]
    table = pd.read_csv(project / "reports" / "data" / "branches_zeroed.csv")
    assert table.loc[table["task"] == "mean", "intact"].item() == pytest.approx(ev["success"])
    results = (project / "reports" / "results.md").read_text()
    assert "**Is the task layer used?**" in results and "](figures/branches.png)" in results
