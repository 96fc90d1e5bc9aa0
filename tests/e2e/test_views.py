"""What a researcher opens: the MLflow store (experiment kind, saved runs view, run names and
links), a copied checkout writing into its own store, and rollout videos rendered off-screen.
Real MLflow (SQLite) and real Meta-World/MuJoCo rendering."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ptsl import make_env
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.envs import MetaWorldTaskEnv, load_tasks
from ptsl.core.records import VideoIndex

from ..helpers import log_file, mlflow_client


def test_experiment_opens_as_model_training_with_a_compare_view(tmp_path, tracking_on,
                                                                monkeypatch):
    log_file(tmp_path, "a-1", "baseline")
    monkeypatch.setenv("DVC_EXP_NAME", "pal8")
    run_id = log_file(tmp_path, "a-1", "ablation")
    client = mlflow_client(tmp_path)
    exp = client.get_experiment_by_name("train")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    envelope = json.loads(exp.tags["mlflow.sharedViewState.compare"])
    columns = json.loads(envelope["state"])["selectedColumns"]
    for column in ("params.`method`", "params.`pal_dim`", "metrics.`final_success`",
                   "metrics.`parameter_count`"):
        assert column in columns
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["a-1", "a-1 [pal8]"]
    run = client.get_run(run_id)
    assert run.data.tags["dvc_experiment"] == "pal8"
    assert run.data.tags["dvc_stage"] == run.data.tags["mlflow.source.name"] == "train@a-1"


def test_copied_checkout_writes_artifacts_into_its_own_folder(tmp_path, tracking_on, capsys):
    first, copy = tmp_path / "first", tmp_path / "copy"
    first.mkdir()
    old_run = log_file(first, "a-1", "first")
    shutil.copytree(first, copy)
    before = sorted(p.relative_to(first) for p in (first / "mlartifacts").rglob("*"))
    new_run = log_file(copy, "a-2", "copy")
    assert "artifact locations moved from" in capsys.readouterr().out

    client = mlflow_client(copy)
    new_uri = client.get_run(new_run).info.artifact_uri
    assert new_uri.startswith((copy / "mlartifacts").as_uri() + "/")
    assert (copy / "mlartifacts" / "train" / new_run / "artifacts" / "note.txt").read_text() == "copy"
    # The original checkout is untouched, and the copy's older runs read their copied files.
    assert sorted(p.relative_to(first) for p in (first / "mlartifacts").rglob("*")) == before
    assert client.get_run(old_run).info.artifact_uri.startswith((copy / "mlartifacts").as_uri())
    assert [a.path for a in client.list_artifacts(old_run)] == ["note.txt"]
    assert mlflow_client(first).get_run(old_run).info.artifact_uri.startswith(
        (first / "mlartifacts").as_uri())


def test_make_env_gives_observations_an_agent_acts_on(task_cache):
    env = make_env("reach-v3", seed=1, evaluation=True, task_cache=task_cache)
    try:
        obs = env.reset()
        assert obs.shape == (1, 39) and env.tasks.names == ("reach-v3",)
        agent = build_agent(_cfg(), Shapes(39, 4, 1), env.tasks.names)
        step = env.step(agent.act(obs, env.task_ids))
        assert step.obs.shape == (1, 39) and np.isfinite(step.raw_reward).all()
    finally:
        env.close()


def _cfg() -> RunConfig:
    exp = ExperimentConfig(benchmark="reach-v3", method="mtsac", hidden_dim=32, num_layers=2)
    return RunConfig(name="t", seed=1, experiment=exp, env=EnvConfig(episode_length=12),
                     sac=SACConfig(batch_size=32),
                     train=TrainConfig(steps=10, eval_every=5, checkpoint_every=5))


def test_rollout_frames_are_rendered_and_gifs_reproducible(tmp_path, task_cache, monkeypatch):
    from ptsl.core import rollouts as videos

    backend = videos.find_backend()
    if backend is None:
        pytest.skip(videos.no_backend_message())
    monkeypatch.setenv("MUJOCO_GL", backend)
    monkeypatch.setenv("PYOPENGL_PLATFORM", backend)
    cfg = _cfg()
    tasks = load_tasks("reach-v3", 1, task_cache)
    agent = build_agent(cfg, Shapes(39, 4, 1), tasks.names)
    env = MetaWorldTaskEnv("reach-v3", tasks.goals[0], cfg.env, 1000, normalize=False,
                           render_size=64)
    try:
        frames, _success = videos.record_episode(agent, env, 0, cfg.env.episode_length, every=3)
    finally:
        env.close()
    assert len(frames) == 1 + 12 // 3
    for frame in frames:
        assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8
        assert frame.std() > 10  # a scene, not a blank or single-colour image
    assert not np.array_equal(frames[0], frames[-1])  # the episode moves the arm
    settings = videos.VideoSettings(size=48, every=4)
    index = [videos.record_videos(agent, tasks, cfg.env, 1, tmp_path / name, settings)
             for name in ("a", "b")]
    assert index[0] == index[1] and index[0].tasks["reach-v3"].frames == 4
    gif_a, gif_b = (tmp_path / n / "reach-v3.gif" for n in ("a", "b"))
    assert gif_a.read_bytes()[:6] == b"GIF89a" and gif_a.read_bytes() == gif_b.read_bytes()
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "index.json", "reach-v3.gif", "reach-v3.png"]


def test_stage_help_explains_every_argument():
    import re
    import subprocess
    import sys

    from ..conftest import ROOT

    scripts = ["validate", "check_env", "train", "evaluate", "aggregate"]
    procs = {s: subprocess.Popen([sys.executable, str(ROOT / "pipeline" / f"{s}.py"), "--help"],
                                 stdout=subprocess.PIPE, text=True) for s in scripts}
    for script, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, script
        usage, _, options = out.partition("options:")
        flags = set(re.findall(r"\[?(--[\w-]+)", usage)) - {"--help"}
        assert flags, out
        # `  --flag METAVAR  text`: every flag is followed by its explanation on the same line.
        explained = set(re.findall(r"^\s+(--[\w-]+)(?: [A-Z_]+)?\s{2,}\S", options, re.M))
        assert flags <= explained, f"{script}: no help for {sorted(flags - explained)}"


def test_report_copies_gifs_and_draws_a_contact_sheet_per_table(tmp_path, raw_params):
    """The aggregate side of videos, from folders as the evaluate stage writes them."""
    from ptsl.core import rollouts as videos
    from ptsl.ops.params import parse_params
    from ptsl.report.rollouts import collect_videos, write_videos

    params = parse_params(raw_params)
    rng = np.random.default_rng(0)
    data = tmp_path / "videos"
    recorded = {"mt10_mtsac-1", "mt10_softmod-1"}
    for exp in params.runs.plain + params.runs.ptsl:
        name = f"{exp}-1"
        if name not in recorded:
            videos.write_no_videos(data / name, "evaluate.videos is false")
            continue
        folder = data / name
        folder.mkdir(parents=True)
        tasks = {}
        for task in ("reach-v3", "push-v3"):
            frames = [rng.integers(0, 255, (16, 16, 3), dtype=np.uint8) for _ in range(3)]
            videos.write_gif(frames, folder / f"{task}.gif", 80)
            from PIL import Image

            Image.fromarray(frames[-1]).save(folder / f"{task}.png")
            tasks[task] = {"success": task == "reach-v3", "frames": 3}
        (folder / VideoIndex.NAME).write_text(json.dumps({"videos": True, "tasks": tasks}))
    found = collect_videos(params, data)
    assert set(found) == recorded
    params = parse_params({**raw_params, "tables": {
        "two": {"title": "Two rows", "rows": ["mt10_mtsac", "mt10_softmod"], "at": "short"},
        "three": {"title": "Three rows", "rows": ["mt10_mtsac", "mt10_softmod", "mt10_care"],
                  "at": "short"}}})
    out = tmp_path / "reports"
    files = {}
    sheets = write_videos(params, found, out, files)
    assert sheets == {"two": "figures/two_rollouts.png"}  # a row without videos: no sheet
    assert list(files) == ["figures/two_rollouts.png"]
    assert files["figures/two_rollouts.png"][0][:4] == b"\x89PNG"
    assert sorted(p.relative_to(out / "videos").as_posix() for p in (out / "videos").rglob("*.gif")) \
        == ["mt10_mtsac-1/push-v3.gif", "mt10_mtsac-1/reach-v3.gif",
            "mt10_softmod-1/push-v3.gif", "mt10_softmod-1/reach-v3.gif"]
    assert write_videos(params, {}, out, files) == {}
    assert sorted(p.name for p in (out / "videos").iterdir()) == ["README.md"]


def _shown(pal_dims: dict[str, int], success: dict[str, float], failed: str = "") -> list:
    """`dvc exp show --json` as DVC 3 prints it: the workspace, a commit, experiments under it."""
    def data(name):
        if name == failed:
            return None
        return {"params": {"params.yaml": {"data": {
                    "pal_dim": pal_dims[name], "budgets": {"paper": {"seeds": [1, 2]}},
                    "experiments": {"r_ptsl": {"label": "CARE+PTSL"}, "r_sac": {}},
                    "tables": {"t": {"title": "Tiny", "rows": ["r_sac", "r_ptsl"], "at": "short"}}}}},
                "metrics": {"reports/metrics/r_sac.json": {"data": {"short": 0.5}},
                            "reports/metrics/r_ptsl.json": {"data": {"short": success[name]}}}}
    exps = [{"name": n, "executor": None if n != failed else {"state": "failed"},
             "revs": [{"rev": "f" * 40, "name": n, "data": data(n),
                       "error": {"msg": "x"} if n == failed else None}]}
            for n in pal_dims if n not in ("workspace", "main")]
    return [{"rev": "workspace", "name": None, "data": data("workspace"), "error": None,
             "experiments": None},
            {"rev": "a" * 40, "name": "main", "data": data("main"), "error": None,
             "experiments": exps}]


def test_experiments_view_puts_a_table_row_on_each_line_and_an_experiment_in_each_column():
    from ptsl.ops.exps import columns_from_json, render

    shown = _shown({"workspace": 50, "main": 50, "pal32": 32, "pal8": 8},
                   {"workspace": 0.25, "main": 0.25, "pal32": 0.375, "pal8": 0.25},
                   failed="pal8")
    cols = columns_from_json(shown)
    assert [c.name for c in cols] == ["workspace", "main", "pal32", "pal8"]
    assert [c.state for c in cols] == ["", "", "", "failed"]
    view = render(cols, width=120)
    lines = view.splitlines()
    assert lines[0].split() == ["workspace", "main", "pal32", "pal8", "(failed)"]
    assert lines[1] == "changed params"
    assert lines[2].split() == ["pal_dim", "50", "50", "32", "-"]
    assert "budgets" not in view  # presets are bookkeeping, not knobs an experiment turned
    assert lines[3] == "Tiny [t]"
    assert lines[4].split() == ["r_sac", "0.500", "0.500", "0.500", "-"]
    assert lines[5].split() == ["CARE+PTSL", "0.250", "0.250", "0.375", "-"]
    changed = render(cols[:3], only_changed=True).splitlines()
    assert [ln.split()[0] for ln in changed[1:5]] == ["changed", "pal_dim", "Tiny", "CARE+PTSL"]
    same = render(cols[:2], only_changed=True)
    assert "no param differs" in same and "no table row's number differs" in same
