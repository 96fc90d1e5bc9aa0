"""End to end: `dvc repro` on a tiny budget with real Meta-World, real DVC and a real MLflow
store, then the reports, the MLflow runs and a no-op second repro.

The experiment is `long`: seed 1 (the only long seed) trains on to 60 steps while seed 2 stops at
40, so the short table reads both runs at step 40 and the long table reads seed 1 at step 60 from
the same curve.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from ..pipeline_project import dvc, make_project

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                              "num_layers": 2, "long": True, "label": "Tiny MT-SAC"}}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("project"), EXPERIMENTS, seeds=[1, 2],
                        long_steps=60)
    dvc(root, "repro")
    return root


def test_runs_share_one_curve_for_short_and_long_tables(project):
    steps = {s: json.loads((project / "data" / "runs" / f"tiny_mtsac-{s}" / "summary.json")
                           .read_text())["final_step"] for s in (1, 2)}
    assert steps == {1: 60, 2: 40}
    short = pd.read_csv(project / "reports" / "tables" / "short.csv")
    long = pd.read_csv(project / "reports" / "tables" / "long.csv")
    assert short[["step", "seeds"]].values.tolist() == [[40, 2]]
    assert long[["step", "seeds"]].values.tolist() == [[60, 1]]
    curve1 = pd.read_csv(project / "data" / "runs" / "tiny_mtsac-1" / "curve.csv")
    at60 = curve1.step == 60
    assert long["evaluation_final_mean"].iloc[0] == pytest.approx(
        curve1.loc[at60, "success"].item())
    assert long["evaluation_best_mean"].iloc[0] == pytest.approx(curve1["success"].max())
    # Training success: the window before step 60 (20-step episodes: one per 20 steps).
    assert curve1.loc[at60, "train_episodes"].item() == 1
    assert long["training_final_mean"].iloc[0] == pytest.approx(
        curve1.loc[at60, "train_success"].item())
    assert long["training_best_mean"].iloc[0] == pytest.approx(curve1["train_success"].max())


def test_reports_exist_and_agree(project):
    short = pd.read_csv(project / "reports" / "tables" / "short.csv")
    evals = [json.loads((project / "data" / "eval" / f"tiny_mtsac-{s}.json").read_text())
             for s in (1, 2)]
    assert short["parameters"].iloc[0] == evals[0]["parameter_count"]
    for metric in ("evaluation", "training"):
        assert (short[f"{metric}_iqm_low"].iloc[0] <= short[f"{metric}_iqm"].iloc[0]
                <= short[f"{metric}_iqm_high"].iloc[0])
    results = (project / "reports" / "results.md").read_text()
    assert "| Tiny MT-SAC |" in results
    assert "| evaluation IQM final [95% CI] | published | training IQM final [95% CI] |" in results
    assert "#### Tiny (reported at 40 vector steps per task)" in results
    # A tiny project's protocol is custom: no published value beside ours, and it says so.
    assert "protocol `custom`" in results and "No published value for these rows." in results
    for name in ("short_curves.png", "short_tasks.png", "long_curves.png", "long_tasks.png"):
        assert (project / "reports" / "figures" / name).read_bytes()[:4] == b"\x89PNG"
    # One headline number per table row, one file per experiment (details in tables/*.csv).
    assert sorted(p.name for p in (project / "reports" / "metrics").iterdir()) == ["tiny_mtsac.json"]
    metrics = json.loads((project / "reports" / "metrics" / "tiny_mtsac.json").read_text())
    assert metrics == {"short": pytest.approx(short["evaluation_mean"].iloc[0], abs=1e-4),
                       "long": pytest.approx(long_mean(project), abs=1e-4)}
    # Videos are off by default: the evaluate stage says so, the report folder explains it.
    index = json.loads((project / "data" / "videos" / "tiny_mtsac-1" / "index.json").read_text())
    assert index == {"videos": False, "reason": "evaluate.videos is false"}
    assert sorted(p.name for p in (project / "reports" / "videos").iterdir()) == ["README.md"]
    env = json.loads((project / "reports" / "environment.json").read_text())
    assert env["torch"]["device"] == "cpu" and "metaworld" in env["versions"]
    bench = json.loads((project / "reports" / "benchmarks.json").read_text())
    assert bench["reach-v3"]["obs_dim"] == 39
    for s in (1, 2):
        run = project / "data" / "runs" / f"tiny_mtsac-{s}"
        assert sorted(p.name for p in run.iterdir()) == ["curve.csv", "model.pt", "model.pt.sha256",
                                                         "summary.json"]


def long_mean(project) -> float:
    return pd.read_csv(project / "reports" / "tables" / "long.csv")["evaluation_mean"].iloc[0]


def test_mlflow_runs_logged(project):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    names = {}
    for exp in ("check_env", "train", "evaluate", "aggregate"):
        e = client.get_experiment_by_name(exp)
        assert e is not None, exp
        runs = client.search_runs([e.experiment_id])
        names[exp] = sorted(r.info.run_name for r in runs)
        assert all(r.info.status == "FINISHED" for r in runs)
    assert names["train"] == ["tiny_mtsac-1", "tiny_mtsac-2"]
    assert names["evaluate"] == ["tiny_mtsac-1", "tiny_mtsac-2"]
    train_exp = client.get_experiment_by_name("train")
    run = client.search_runs([train_exp.experiment_id], "attributes.run_name = 'tiny_mtsac-1'")[0]
    assert run.data.tags["dvc_stage"] == "train@tiny_mtsac-1"
    assert "git_commit" in run.data.tags
    assert run.data.params["sac.batch_size"] == "32"
    history = client.get_metric_history(run.info.run_id, "eval/success")
    assert [m.step for m in history] == [0, 20, 40, 60]
    agg = client.get_experiment_by_name("aggregate")
    agg_run = client.search_runs([agg.experiment_id])[0]
    artifacts = {a.path for a in client.list_artifacts(agg_run.info.run_id)}
    assert {"results.md", "metrics", "short_curves.png", "long_tasks.png"} <= artifacts


def test_second_repro_is_a_noop_and_dvc_views_work(project):
    out = dvc(project, "repro").stdout
    # Only the validate stage runs (always); its output is unchanged, so nothing else does.
    assert re.findall(r"Running stage '([^']+)'", out) == ["validate"]
    assert "Stage 'aggregate' didn't change, skipping" in out
    assert json.loads(dvc(project, "status", "--json").stdout) == {"validate": ["always changed"]}
    assert "tiny_mtsac" in dvc(project, "metrics", "show").stdout
    plots = dvc(project, "plots", "show", "--json").stdout
    for name in ("tables/short.csv", "tables/long.csv", "runs/tiny_mtsac-1.csv",
                 "runs/tiny_mtsac-2.csv"):
        assert f"reports/plots/{name}" in plots
    table = pd.read_csv(project / "reports" / "plots" / "tables" / "short.csv")
    assert table["title"].unique().tolist() == [
        "Tiny (reported at 40 vector steps per task): mean over 2 seed(s)"]
    assert table["row"].unique().tolist() == ["Tiny MT-SAC"] and table["step"].max() == 40
    run = pd.read_csv(project / "reports" / "plots" / "runs" / "tiny_mtsac-1.csv")
    assert run["title"].iloc[0] == "Tiny MT-SAC: tiny_mtsac-1" and run["step"].max() == 60


def test_plots_page_works_offline(project):
    """The page carries the charting library itself: no script is fetched from the network."""
    import re

    dvc(project, "plots", "show")
    page = (project / "dvc_plots" / "index.html").read_text()
    assert not re.search(r"<script[^>]+src=", page) and "https://cdn" not in page
    assert "vegaEmbed" in page and page.count("vegaEmbed('#") == 4  # 2 tables + 2 runs
