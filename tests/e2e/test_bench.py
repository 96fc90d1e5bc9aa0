"""The benchmark runs end to end on real Meta-World at a smoke size and records every section."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ptsl.ops.params import load_params
from ptsl.tools.bench.updates import method_rows

from ..conftest import ROOT


def test_quick_benchmark_prints_and_records_every_section(tmp_path):
    env = dict(os.environ, PTSL_DEVICE="cpu", PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-m", "ptsl.tools.bench", "--quick", "--out", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for heading in ("Environments", "Update at paper size", "Training loop end to end",
                    "Runs sharing one GPU: not measured (no CUDA device)", "Cost on this machine",
                    "Targets"):
        assert heading in out, heading
    record = json.loads((tmp_path / "cpu-quick.json").read_text())
    assert record["device"]["type"] == "cpu" and record["device"]["threads"] == 1
    assert record["device"]["matmul_precision"] == "highest"
    assert {"tf32_cublas", "tf32_cudnn", "tf32_cublas_override"} <= set(record["device"])
    assert record["versions"]["torch"].startswith("2.13.0")
    envs = record["envs"]
    assert envs["raw Meta-World env, one core"]["fraction_of_raw"] == 1.0
    assert {"MT10 vector env, sync", "MT10 vector env, async",
            "MT10 collection, sync, policy in the loop"} <= set(envs)
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
    # --quick times the loop of MT-SAC alone.
    assert set(record["loop"]) == {"MT-SAC 400x3"}
    assert record["loop"]["MT-SAC 400x3"]["update"] == "host"
    assert all(r["env_steps_per_s"] > 0 for r in record["loop"].values())
    gpu = [t for t in record["targets"] if t["target"].startswith("GPU")]
    assert gpu and all(t["status"] == "not measured" for t in gpu)
    assert record["costs"]["grid_training_stages"] > 0
