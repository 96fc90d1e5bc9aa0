"""End to end: `dvc repro` on a tiny budget with real Meta-World, real DVC and a real MLflow
store, then the reports, the data files, the MLflow runs, a no-op second repro, and a push to
the project's default DVC remote that a fresh clone pulls and reproduces without training.

The experiment is `long`: seed 1 (the only long seed) trains on to 60 steps while seed 2 stops at
40, so the short table reads both runs at step 40 and the long table reads seed 1 at step 60 from
the same curve.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from ..conftest import ROOT
from ..pipeline_project import dvc, make_project

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                              "num_layers": 2, "long": True, "label": "Tiny MT-SAC"}}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    # A folder of its own around the checkout: the default DVC remote lives beside it.
    root = tmp_path_factory.mktemp("e2e") / "ptsl"
    root.mkdir()
    make_project(root, EXPERIMENTS, seeds=[1, 2], long_steps=60, git=True)
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
    assert ("| evaluation IQM final [95% CI] | evaluation mean final [95% CI] ± std | training "
            "IQM final [95% CI] | training mean final [95% CI] ± std | evaluation best so far |"
            ) in results
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


def test_the_data_files_load_with_the_lines_the_docs_show(project, monkeypatch):
    block = re.search(r"<!-- data-example[^>]*-->\s*```python\n(.*?)```",
                      (ROOT / "docs" / "statistics.md").read_text(), re.S).group(1)
    monkeypatch.chdir(project)
    found: dict = {}
    exec(block.replace("mt10_200k", "short"), found)  # the tiny project's table is `short`
    runs, protocol, table = found["runs"], found["protocol"], found["table"]
    # Seed 1 evaluated at 0, 20, 40, 60, seed 2 at 0, 20, 40; one task.
    assert len(runs) == 7 and runs["task"].unique().tolist() == ["reach-v3"]
    assert runs.columns[:6].tolist() == ["benchmark", "experiment", "method", "seed", "task",
                                         "step"]
    curve = pd.read_csv(project / "data" / "runs" / "tiny_mtsac-1" / "curve.csv")
    one = runs[runs["seed"] == 1]
    assert one["evaluation_success"].tolist() == curve["success/reach-v3"].tolist()
    assert one["training_episodes"].tolist() == curve["train_episodes"].tolist()
    assert set(runs["protocol"]) == {"custom"} and set(runs["evaluation_episodes"]) == {1}
    assert protocol["versions"]["torch"] == "2.13.0"
    assert protocol["evaluation"]["policy"].startswith("deterministic")
    assert protocol["training"]["q_value_clip"] is None
    assert protocol["tables"]["long"] == {"title": "Tiny long", "rows": ["tiny_mtsac"],
                                          "step": 60, "seeds": [1],
                                          "aggregation": "final, per run",
                                          "headline_metric": "evaluation"}
    # rliable's layout: (runs, tasks) per row, the scores at the table's step.
    scores = found["score_dict"]
    assert list(scores) == ["tiny_mtsac"] and scores["tiny_mtsac"].shape == (2, 1)
    at40 = [pd.read_csv(project / "data" / "runs" / f"tiny_mtsac-{s}" / "curve.csv")
            .set_index("step").loc[40, "success/reach-v3"] for s in (1, 2)]
    assert scores["tiny_mtsac"][:, 0].tolist() == at40
    assert table["evaluation_curves/tiny_mtsac"].shape == (2, 1, 3)
    assert table["steps"].tolist() == [0, 20, 40] and table["tasks"].tolist() == ["reach-v3"]
    assert np.isnan(table["training_curves/tiny_mtsac"][:, 0, 0]).all()  # none by step 0


def test_a_fresh_clone_pulls_every_run_and_trains_nothing(project):
    """`make push` (dvc push) to the project's default remote, a folder beside the checkout
    (.dvc/config), then `dvc pull` in a fresh clone: every model, curve and evaluation comes
    back, and `dvc repro` there skips every training and evaluation stage."""
    shutil.copy2(ROOT / ".dvc" / "config", project / ".dvc" / "config")
    for cmd in (["add", "-A"], ["commit", "-qm", "results"]):
        subprocess.run(["git", *cmd], cwd=project, check=True, capture_output=True)
    pushed = dvc(project, "push").stdout
    assert (project.parent / "ptsl-dvc-remote" / "files").is_dir()
    clone = project.parent / "fresh-clone"
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    assert not (clone / "data" / "runs" / "tiny_mtsac-1").exists()
    pulled = dvc(clone, "pull").stdout
    for s in (1, 2):
        for rel in (f"data/runs/tiny_mtsac-{s}/model.pt", f"data/runs/tiny_mtsac-{s}/curve.csv",
                    f"data/eval/tiny_mtsac-{s}.json", f"data/videos/tiny_mtsac-{s}/index.json"):
            assert (clone / rel).read_bytes() == (project / rel).read_bytes(), rel
    out = dvc(clone, "repro").stdout
    for stage in ("train@tiny_mtsac-1", "train@tiny_mtsac-2", "evaluate@tiny_mtsac-1",
                  "evaluate@tiny_mtsac-2", "aggregate"):
        assert f"Stage '{stage}' didn't change, skipping" in out, out
    assert re.findall(r"Running stage '([^']+)'", out) == ["validate"]
    print(f"\n$ dvc push\n{pushed}\n$ git clone; dvc pull\n{pulled}\n$ dvc repro\n{out}")
