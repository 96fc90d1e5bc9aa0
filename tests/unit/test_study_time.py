"""How long a study took, from a real MLflow store holding runs as the training stages leave
them: a killed attempt and the run that resumed it (re-logging the older rows), a finished run,
one still running; and the command's refusals."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from ptsl.tools import study_time as tool
from ptsl.ops.study_time import most_at_once, render, study_time

from ..conftest import ROOT


def _run(client, exp_id, stage, start, rows, status=None, end=None, resumed_at=None,
         orphan=False):
    """A run of ``stage`` started at ``start`` (ms) with ``train/success`` at (step, ms);
    ``orphan``: ended by the next attempt, as ptsl.ops.tracking.close_orphans does."""
    tags = {"dvc_stage": stage, "dvc_experiment": "workspace", "host": "box",
            "torch_threads": "1"}
    if resumed_at is not None:
        tags["ptsl.resumed_at_step"] = str(resumed_at)
    run = client.create_run(exp_id, start_time=start, tags=tags)
    for step, ms in rows:
        client.log_metric(run.info.run_id, "train/success", 0.1, timestamp=ms, step=step)
    if status:
        client.set_terminated(run.info.run_id, status=status, end_time=end)
    if orphan:
        client.update_run(run.info.run_id, name=f"{stage.split('@')[1]} (killed)")
    return run.info.run_id


@pytest.fixture
def store(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("s/train")
    old = [(150, 1_060_000), (300, 1_120_000)]
    # Killed at about 1,150 s; the store knows it got to its row of 1,120 s.
    _run(client, exp, "train@a-1", 1_000_000, old, "KILLED", end=1_900_000, orphan=True)
    _run(client, exp, "train@a-1", 2_000_000, old + [(450, 2_100_000), (600, 2_290_000)],
         "FINISHED", end=2_300_000, resumed_at=300)
    _run(client, exp, "train@b-1", 1_050_000, [(600, 1_490_000)], "FINISHED", end=1_500_000)
    _run(client, exp, "train@c-1", 2_500_000, [(150, 2_550_000)])  # still running
    # Stopped by SIGTERM (it ended its run itself), then a failed attempt: their own end times.
    _run(client, exp, "train@e-1", 1_100_000, [(150, 1_150_000)], "KILLED", end=1_160_000)
    _run(client, exp, "train@e-1", 1_200_000, [], "FAILED", end=1_210_000)
    _run(client, client.create_experiment("other/train"), "train@a-1", 1_000, [], "FINISHED",
         end=9_000_000)  # another study's
    # Trained against another store, its outputs restored by DVC (ptsl.ops.restored): no time
    # spent here, and no attempt.
    restored = _run(client, exp, "train@d-1", 3_000_000, [], "FINISHED", end=3_000_100)
    client.set_tag(restored, "ptsl.restored", "true")
    return uri


def test_attempts_spans_and_sums(store):
    record = study_time("s", store, ["train@a-1", "train@b-1", "train@c-1", "train@d-1",
                                     "train@e-1"]).record()
    stages = {s["stage"]: s for s in record["train"]}
    a = stages["train@a-1"]
    assert a["finished"] and a["attempts"] == 2
    assert a["seconds"] == 120 + 300  # the killed attempt to its last row, then the resume
    assert [(r["resumed_at"], r["last_step"]) for r in a["runs"]] == [(0, 300), (300, 600)]
    assert stages["train@b-1"]["seconds"] == 450
    assert not stages["train@c-1"]["finished"] and stages["train@c-1"]["seconds"] == 0
    assert stages["train@e-1"]["seconds"] == 60 + 10 and not stages["train@e-1"]["finished"]
    assert record["training_runs_finished"] == 2
    assert record["training_runs_unfinished"] == ["train@c-1", "train@e-1"]
    assert record["training_runs_not_in_store"] == ["train@d-1"]
    assert record["training_seconds"] == 870 + 70
    assert record["wall_seconds"] == 1300  # 1,000 s to 2,300 s
    assert record["first_start"] == "1970-01-01T00:16:40Z"
    assert record["most_training_runs_at_once"] == 3  # a's first attempt beside b and e's first
    assert record["hosts"] == ["box"] and record["threads_per_run"] == ["1"]
    table = render(record)
    assert "| train@a-1 | yes | 7 min | 2 | 0-300, 300-600 |" in table
    assert "| train@d-1 | no run in this store | | | |" in table


def test_most_at_once():
    assert most_at_once([]) == 0
    assert most_at_once([(0, 10), (10, 20)]) == 1  # one ends as the next starts
    assert most_at_once([(0, 10), (5, 20), (6, 7), (30, 40)]) == 3


def test_a_store_without_the_study_is_one_line_and_writes_nothing(store, tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    assert tool.main(["mt10-cpu", "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
    assert capsys.readouterr().err.strip() == (
        f"error: {store}: no training run of study 'mt10-cpu' (MLflow experiment "
        "mt10-cpu/train); set MLFLOW_TRACKING_URI to the store its stages logged to")


def test_an_unknown_study_is_one_line(monkeypatch):
    # python -m prints it as "error: <message>" and exits with 2 (tests/e2e/test_entry_points.py).
    monkeypatch.chdir(ROOT)
    with pytest.raises(FileNotFoundError) as err:
        tool.main(["nope"])
    assert str(err.value) == (f"no study 'nope' (no studies/nope/params.yaml in {ROOT}); "
                              "studies here: mt10-b1280, mt10-b1280-v2, mt10-cpu")


def test_a_store_with_the_study_gives_its_table(store, tmp_path, monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    exp = client.create_experiment("mt10-cpu/train")
    _run(client, exp, "train@mt10_mtsac-1", 1_000, [(100_000, 2_700_000)], "FINISHED",
         end=2_761_000)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    out = tmp_path / "out"
    assert tool.main(["mt10-cpu", "--out", str(out)]) == 0
    record = json.loads((out / "time.json").read_text())
    with Image.open(out / "time.png") as im:  # the timeline: one finished run drawn
        assert im.format == "PNG" and im.size[0] > 500
    assert record["training_runs_finished"] == 1 and record["training_seconds"] == 2760
    assert len(record["training_runs_not_in_store"]) == 24  # 5 rows x 5 seeds, one logged
    printed = capsys.readouterr().out
    assert "| train@mt10_mtsac-1 | yes | 46 min | 1 | 0-100,000 |" in printed
    assert printed.endswith(f"wrote {out / 'time.json'} and {out / 'time.png'}\n")
