"""The benchmark runs end to end on real Meta-World at a smoke size and records every section it
was asked for (the two runs together measure each section once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ptsl.ops.params import load_params
from ptsl.tools.bench.updates import method_rows

from ..conftest import ROOT


def _bench(out_dir, *args: str) -> tuple[str, dict]:
    env = dict(os.environ, PTSL_DEVICE="cpu", PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-m", "ptsl.tools.bench", "--quick", "--out",
                           str(out_dir), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads((out_dir / "cpu-quick.json").read_text())


def test_quick_benchmark_prints_and_records_the_environment_loop_study_gpu_and_node_sections(
        tmp_path):
    out, record = _bench(tmp_path, "--only", "node,gpu,loop,envs,study")
    for heading in ("Environments", "Training loop end to end", "Study studies/mt10-cpu",
                    "Runs sharing one GPU: not measured (no CUDA device)",
                    "A node's table: 2 runs at once", "Cost on this machine", "Targets"):
        assert heading in out, heading
    assert "Update at paper size" not in out
    assert record["device"]["type"] == "cpu" and record["device"]["threads"] == 1
    assert record["device"]["matmul_precision"] == "highest"
    assert {"tf32_cublas", "tf32_cudnn", "tf32_cublas_override"} <= set(record["device"])
    assert record["versions"]["torch"].startswith("2.13.0")
    assert record["only"] == ["envs", "loop", "study", "gpu", "node"]
    assert {k: v["status"] for k, v in record["sections"].items()} == {
        "envs": "done", "loop": "done", "study": "done", "gpu": "skipped", "node": "done"}
    # The node's stand-in: the table's first two rows, one process each, measured together.
    node = record["node"]
    assert node["runs"] == 2
    assert list(node["rows"]) == ["MT-SAC 400x3", "Soft Modularization 400x2"]
    rates = [r for row in node["rows"].values() for r in row["vector_steps_per_s_each"]]
    assert len(rates) == 2 and all(r > 0 for r in rates)
    assert node["vector_steps_per_s"] == sum(rates) and node["gpu_busy"] is None
    assert node["busy_cores"] > 0 and node["limit"]
    assert "A node's table: 2 runs at once (one process each" in out
    (target,) = [t for t in record["targets"] if "node" in t["target"]]
    assert target["status"] == "not measured"  # a GPU node's target
    # --quick measures the study's first row: its loop against collection + matrix work.
    assert record["study"]["device"] == "cpu" and record["study"]["threads"] == 1
    (row,) = record["study"]["rows"].values()
    assert row["experiment"] == "mt10_mtsac" and row["batch"] == 128
    assert row["floor_ms"] == row["collection_ms"] + row["update_matrix_ms"] > 0
    assert row["loop_over_floor"] == row["loop_ms"] / row["floor_ms"]
    assert "updates" not in record and "gpu_sharing" not in record
    envs = record["envs"]
    assert envs["raw Meta-World env, one core"]["fraction_of_raw"] == 1.0
    assert {"MT10 vector env, sync", "MT10 vector env, async",
            "MT10 collection, sync, policy in the loop"} <= set(envs)
    # --quick times the loop of MT-SAC alone.
    assert set(record["loop"]) == {"MT-SAC 400x3"}
    assert record["loop"]["MT-SAC 400x3"]["update"] == "host"
    assert all(r["env_steps_per_s"] > 0 for r in record["loop"].values())
    gpu = [t for t in record["targets"] if t["target"].startswith("GPU")]
    assert gpu and all(t["status"] == "not measured" for t in gpu)
    assert record["costs"]["grid_training_stages"] > 0


def test_one_section_alone_records_only_it(tmp_path):
    out, record = _bench(tmp_path, "--only", "updates")
    assert "Update at paper size" in out and "Environments" not in out
    assert record["only"] == ["updates"]
    assert list(record["sections"]) == ["updates"]
    assert record["sections"]["updates"]["status"] == "done"
    assert not {"envs", "loop", "study", "gpu_sharing", "node"} & set(record)
    assert record["costs"] == {}  # nothing to cost without the loop
    rows = record["updates"]["rows"]
    labels = [label for label, _ in method_rows(load_params(ROOT / "params.yaml")).values()]
    assert labels[:3] == ["MT-SAC 400x3", "Soft Modularization 400x2", "CARE 400x3"]
    for label in labels:
        row = rows[f"{label} | eager"]
        assert row["updates_per_s"] > 0 and row["gflop_per_update"] > 0
    if record["versions"]["stable-baselines3"] == "not installed":
        assert "Stable-Baselines3: not measured" in out
    else:
        assert "Stable-Baselines3 SAC 400x3" in rows


def test_an_unknown_section_is_one_line_and_writes_nothing(tmp_path):
    env = dict(os.environ, PTSL_DEVICE="cpu")
    proc = subprocess.run([sys.executable, "-m", "ptsl.tools.bench", "--only", "envs,gpus",
                           "--out", str(tmp_path / "bench")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == ("error: --only: unknown section 'gpus'; allowed: a comma-separated "
                           "list of envs, updates, loop, study, gpu, node\n")
    assert not (tmp_path / "bench").exists()
