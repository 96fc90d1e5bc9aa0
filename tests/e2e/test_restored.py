"""Runs whose outputs DVC restored appear in MLflow (``python -m ptsl.ops.restored``): a tiny
project trains seed 1 untracked (as a stage whose outputs came from elsewhere: the store has no
run of it) and seed 2 tracked; the command logs seed 1's training and evaluation runs with the
params and metric keys the tracked stages logged, tagged as restored, with the training times
the project's time record gives (none for the evaluation), writes no file under data/, and a
second call logs nothing. The tracked stages run probed (:mod:`tests.process_probe`): MLflow's
usage reporting is off in each, though the environment DVC gave them did not switch it off."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ptsl.ops.restored import curve_metrics, params_changed, source_label
from ptsl.ops.run_times import TIME_RECORD
from ptsl.ops.study_time import Attempt, StageTime, StudyTime, write

from ..helpers import mlflow_client
from ..pipeline_project import dvc, env_for, make_project
from ..process_probe import probe_env, probed

EXPERIMENTS = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                              "num_layers": 2, "label": "Tiny MT-SAC"}}


def restored(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptsl.ops.restored", *args], cwd=root,
                          env={**env_for(root), **env}, capture_output=True, text=True,
                          timeout=300)


def digests(root: Path) -> dict[str, str]:
    """Every file under data/ and dvc.lock, with its SHA-256."""
    files = [*sorted((root / "data").rglob("*")), root / "dvc.lock"]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files if p.is_file()}


def runs(root: Path, experiment: str) -> dict[str, object]:
    """The FINISHED runs of an MLflow experiment of the project's store, by DVC stage."""
    client = mlflow_client(root)
    exp = client.get_experiment_by_name(experiment)
    found = client.search_runs([exp.experiment_id]) if exp else []
    return {r.data.tags["dvc_stage"]: r for r in found}


# Seed 1's training as a time record lists it: two attempts (a kill, then the resume), an
# attempt of an unfinished stage left out (ms since the epoch).
ATTEMPTS = ((1_790_000_000_000, 1_790_000_600_000), (1_790_000_900_000, 1_790_001_200_000))


def time_record(root: Path) -> None:
    """The project's time record, as ``python -m ptsl.tools.study_time`` writes one."""
    def attempt(start: int, end: int | None, status: str) -> Attempt:
        return Attempt(run_id=f"r{start}", status=status, start_ms=start, end_ms=end, host="h",
                       threads="1", resumed_at=0, last_step=40)

    seed1 = StageTime("train@tiny_mtsac-1", (attempt(*ATTEMPTS[0], "KILLED"),
                                             attempt(*ATTEMPTS[1], "FINISHED")))
    other = StageTime("train@tiny_mtsac-9", (attempt(ATTEMPTS[0][0], None, "RUNNING"),))
    write(StudyTime("tiny", [seed1, other]).record(), root / TIME_RECORD)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return tmp_path_factory.mktemp("probe")


@pytest.fixture(scope="module")
def project(tmp_path_factory, probe):
    root = make_project(tmp_path_factory.mktemp("restored"), EXPERIMENTS, seeds=[1, 2])
    dvc(root, "repro", "evaluate@tiny_mtsac-1", env_extra={"PTSL_TRACKING": "off"})
    dvc(root, "repro", "evaluate@tiny_mtsac-2", env=probe_env(env_for(root), probe))
    time_record(root)
    return root


@pytest.fixture(scope="module")
def first_call(project):
    before = digests(project)
    proc = restored(project)
    return proc, before, digests(project)


def test_restored_runs_are_logged_as_the_stages_log_theirs(project, first_call):
    proc, _, _ = first_call
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("restored: project: logged 1 training and 1 evaluation run(s) "
                                  "whose outputs DVC restored (from the DVC cache) to MLflow "
                                  "experiments train, evaluate, tagged ptsl.restored=true, in ")
    assert proc.stdout.rstrip().endswith("s; 2 already there")

    train = runs(project, "train")
    assert set(train) == {"train@tiny_mtsac-1", "train@tiny_mtsac-2"}
    restored_run, tracked = train["train@tiny_mtsac-1"], train["train@tiny_mtsac-2"]
    assert restored_run.info.run_name == "tiny_mtsac-1"
    assert restored_run.info.status == "FINISHED"
    tags = restored_run.data.tags
    assert tags["ptsl.restored"] == "true" and tags["ptsl.restored_from"] == "DVC cache"
    assert tags["dvc_experiment"] == "workspace" and tags["method"] == "mtsac"
    assert "ptsl.restored" not in tracked.data.tags
    # The params the training stage logs: the same names, the same values but the seed's.
    mine, theirs = restored_run.data.params, tracked.data.params
    assert mine.keys() == theirs.keys()
    assert {k for k in mine if mine[k] != theirs[k]} == {"seed"}
    # The curve at every evaluation step, under the names the stage uses; the final numbers.
    client = mlflow_client(project)
    for key in ("eval/success", "eval/return", "eval/success/reach-v3"):
        assert ([m.step for m in client.get_metric_history(restored_run.info.run_id, key)]
                == [m.step for m in client.get_metric_history(tracked.info.run_id, key)]
                == [0, 20, 40])
    curve = (project / "data" / "runs" / "tiny_mtsac-1" / "curve.csv").read_text().splitlines()
    last = dict(zip(curve[0].split(","), curve[-1].split(",")))
    history = client.get_metric_history(restored_run.info.run_id, "eval/success")
    assert history[-1].value == pytest.approx(float(last["success"]))
    assert restored_run.data.metrics["final_success"] == pytest.approx(float(last["success"]))
    assert (restored_run.data.metrics["parameter_count"]
            == tracked.data.metrics["parameter_count"])
    assert "curve/train_success" in restored_run.data.metrics  # the curve's training window
    artifacts = {a.path for a in client.list_artifacts(restored_run.info.run_id)}
    assert artifacts == {"curve.csv", "summary.json"}

    # Started when its training did, lasting the two attempts' time (the gap left out).
    spent = sum(end - start for start, end in ATTEMPTS)
    assert restored_run.info.start_time == ATTEMPTS[0][0]
    assert restored_run.info.end_time == ATTEMPTS[0][0] + spent
    assert tags["ptsl.run_time"] == (
        "trained in 2 attempts, 15 min 0 s in all, the first from 2026-09-21T14:13:20Z, the last "
        "until 2026-09-21T14:33:20Z, as time.json records; the run's end is its start plus that "
        "time")

    evaluate = runs(project, "evaluate")
    assert set(evaluate) == {"evaluate@tiny_mtsac-1", "evaluate@tiny_mtsac-2"}
    e1, e2 = evaluate["evaluate@tiny_mtsac-1"], evaluate["evaluate@tiny_mtsac-2"]
    assert e1.data.tags["ptsl.restored"] == "true"
    assert e1.data.params.keys() == e2.data.params.keys()
    assert e1.data.metrics.keys() == e2.data.metrics.keys()
    record = json.loads((project / "data" / "eval" / "tiny_mtsac-1.json").read_text())
    assert e1.data.metrics["success"] == pytest.approx(record["success"])
    assert e1.data.metrics["success/reach-v3"] == pytest.approx(record["per_task"]["reach-v3"])
    # No record of an evaluation's time: no end time (MLflow shows no duration), and the tag
    # says so.
    assert e1.info.end_time is None and e1.info.status == "FINISHED"
    assert e1.data.tags["ptsl.run_time"].startswith("not recorded: time records keep training "
                                                    "stages only")


def test_no_output_changes(first_call):
    _, before, after = first_call
    assert after == before and len(before) > 5


def test_a_second_call_logs_nothing(project, first_call):
    proc = restored(project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("restored: project: nothing to log; 4 run(s) of its outputs "
                                   "already in the MLflow store")
    assert len(runs(project, "train")) == 2 and len(runs(project, "evaluate")) == 2


def test_the_ui_lists_the_restored_runs(project, first_call):
    proc = subprocess.run([sys.executable, "-m", "ptsl.ops.mlflow_ui"], cwd=project,
                          env=env_for(project), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("train: http://127.0.0.1:5000/#/experiments/")
    assert lines[0].endswith("(2 runs, 1 restored by DVC)")
    assert lines[1].startswith("evaluate: ") and lines[1].endswith("(2 runs, 1 restored by DVC)")


def test_tracking_off_logs_nothing(project, first_call):
    proc = restored(project, PTSL_TRACKING="off")
    assert proc.returncode == 0
    assert proc.stdout.strip() == "restored: tracking is off (PTSL_TRACKING=off): nothing logged"


def test_bad_input_is_one_line(project, tmp_path):
    proc = restored(project, "--study", "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --study: unknown study 'nope'; allowed: none "
                                   f"(folders under {project / 'studies'} with a params.yaml)")
    proc = restored(tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: no project dvc.yaml in {tmp_path}: run this from "
                                   "the project root")


def test_a_stage_whose_params_changed_is_not_shown():
    entry = {"params": {"params.yaml": {"train": {"steps": 40}, "experiments.a": {"x": 1},
                                        "pal_dim": 16}}}
    raw = {"train": {"steps": 40}, "experiments": {"a": {"x": 1}}, "pal_dim": 16}
    assert params_changed(entry, raw) == []
    assert params_changed(entry, {**raw, "pal_dim": 32}) == ["pal_dim"]
    assert params_changed(entry, {**raw, "experiments": {"a": {"x": 1, "y": 2}}}) == [
        "experiments.a"]


def test_the_curve_becomes_step_indexed_metrics(tmp_path):
    path = tmp_path / "curve.csv"
    path.write_text("step,env_steps,success,return,success/reach-v3,train_episodes,"
                    "train_success,train_success/reach-v3\n"
                    "0,0,0.0,1.5,0.0,0,,\n"
                    "20,20,1.0,2.5,1.0,1,1.0,1.0\n")
    assert curve_metrics(path) == [
        ("eval/env_steps", 0.0, 0), ("eval/success", 0.0, 0), ("eval/return", 1.5, 0),
        ("eval/success/reach-v3", 0.0, 0), ("curve/train_episodes", 0.0, 0),
        ("eval/env_steps", 20.0, 20), ("eval/success", 1.0, 20), ("eval/return", 2.5, 20),
        ("eval/success/reach-v3", 1.0, 20), ("curve/train_episodes", 1.0, 20),
        ("curve/train_success", 1.0, 20), ("curve/train_success/reach-v3", 1.0, 20)]


def test_where_the_restored_runs_came_from(tmp_path):
    """--from: a study's own remote (what the grid fetches a fresh clone's runs from) under
    auto, else the cache; the default remote under remote."""
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text(
        "[core]\n    remote = local\n['remote \"local\"']\n    url = ../../remote\n"
        "['remote \"kept\"']\n    url = ../studies/kept/remote\n")
    kept, other = tmp_path / "studies" / "kept", tmp_path / "studies" / "other"
    kept.mkdir(parents=True)
    other.mkdir()
    assert source_label(tmp_path, "auto") == "DVC cache"
    assert source_label(kept, "auto") == "DVC remote kept"
    assert source_label(other, "auto") == "DVC cache"
    assert source_label(other, "remote") == source_label(tmp_path, "remote") == "DVC remote local"
    assert source_label(kept, "cache") == "DVC cache"


def test_stages_whose_outputs_are_missing_or_stale_are_left_out_by_name(project, first_call,
                                                                          tmp_path, monkeypatch):
    import shutil

    import yaml

    from ptsl.ops.restored import Store, report, restore_folder

    copy = Path(shutil.copytree(project, tmp_path / "copy"))
    (copy / "data" / "eval" / "tiny_mtsac-1.json").unlink()
    params = yaml.safe_load((copy / "params.yaml").read_text())
    params["experiments"]["tiny_mtsac"]["hidden_dim"] = 64  # both training stages now stale
    (copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    def no_store(root):
        raise AssertionError("nothing to look up or log, so no store is opened")

    out = restore_folder(copy, "cache", no_store)
    assert out.left_out == {
        "its params changed since dvc.lock (dvc repro runs it again)": [
            "train@tiny_mtsac-1", "train@tiny_mtsac-2"],
        "the params of the run it evaluated changed since dvc.lock (dvc repro runs it again)": [
            "evaluate@tiny_mtsac-1", "evaluate@tiny_mtsac-2"]}
    assert out.present == 0 and out.logged == {"train": 0, "evaluate": 0}
    assert report(out, 0.1)[1] == ("restored: project: left out 2 stage(s), its params changed "
                                   "since dvc.lock (dvc repro runs it again): "
                                   "train@tiny_mtsac-1, train@tiny_mtsac-2")
    # With the params back, only the evaluation whose output is gone is left out; the copy's
    # store has the other three.
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (copy / "params.yaml").write_text((project / "params.yaml").read_text())
    out = restore_folder(copy, "cache", Store)
    assert out.left_out == {"its outputs are not in the workspace (dvc pull)": [
        "evaluate@tiny_mtsac-1"]}
    assert out.present == 3


def test_stage_processes_switch_mlflow_usage_reporting_off(project, probe):
    """DVC started the tracked stages without the switch (nor a CI marker, which MLflow would
    obey alone); each set it on importing ``ptsl.ops``, before MLflow, which then started no
    usage-reporting client."""
    records = probed(probe)
    by_script = {Path(r["argv"][0]).name: r for r in records if r["argv"]}
    assert {"dvc", "validate.py", "train.py", "evaluate.py"} <= set(by_script), by_script.keys()
    assert by_script["dvc"]["at_end"]["MLFLOW_DISABLE_TELEMETRY"] is None
    for script in ("train.py", "evaluate.py"):
        seen = by_script[script]
        assert seen["at_start"] == {"MLFLOW_DISABLE_TELEMETRY": None,
                                    "RAY_USAGE_STATS_ENABLED": None}, script
        assert seen["at_end"] == {"MLFLOW_DISABLE_TELEMETRY": "true",
                                  "RAY_USAGE_STATS_ENABLED": "0"}, script
        assert seen["mlflow"] and not seen["mlflow_sees_ci"], script
        assert not seen["mlflow_reports"], script


def test_restored_runs_without_their_times_are_replaced(project, first_call, tmp_path,
                                                        monkeypatch):
    """A store whose restored runs were logged before they carried their times (no tag
    ptsl.run_time) gets them again with their times; the old ones are deleted."""
    import shutil

    from ptsl.ops.restored import Store, report, restore_folder

    copy = Path(shutil.copytree(project, tmp_path / "copy"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    client = mlflow_client(copy)
    old = runs(copy, "train")["train@tiny_mtsac-1"]
    client.delete_tag(old.info.run_id, "ptsl.run_time")
    out = restore_folder(copy, "cache", Store)
    assert (out.logged, out.present, out.replaced) == ({"train": 1, "evaluate": 0}, 3, 1)
    assert report(out, 0.1)[0].endswith(
        "in 0.1 s; 3 already there; 1 replaced, logged before restored runs carried their times")
    new = runs(copy, "train")["train@tiny_mtsac-1"]
    assert new.info.run_id != old.info.run_id and new.info.start_time == ATTEMPTS[0][0]
    assert client.get_run(old.info.run_id).info.lifecycle_stage == "deleted"
    assert restore_folder(copy, "cache", Store).present == 4
