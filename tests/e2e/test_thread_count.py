"""The training stage writes the same bytes with PTSL_THREADS=1 and 2: a grid worker (one
thread) and the head (torch's default) train alike (tests/unit/test_threads.py checks every
method's update and acting)."""

from __future__ import annotations

import subprocess
import sys

import yaml

from ..pipeline_project import env_for, make_project

BATCH = 128  # the default budget's batch: about 13 rows per task, some tasks 5 to 11


def test_training_stage_outputs_do_not_depend_on_the_thread_count(tmp_path, raw_params):
    """pipeline/train.py at the default sizes (CARE+PTSL 326x3 on MT10, batch 128) with
    PTSL_THREADS=1 and 2: every output byte equal."""
    exp = {k: v for k, v in raw_params["experiments"]["mt10_care_ptsl"].items() if k != "matches"}
    (tmp_path / "p").mkdir()
    root = make_project(tmp_path / "p", {"mt10_care_ptsl": exp}, seeds=[1])
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sac"].update(batch_size=BATCH, init_steps=20)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    outputs = {}
    for threads in ("1", "2"):
        out = tmp_path / f"threads{threads}"
        env = {**env_for(root), "PTSL_TRACKING": "off", "PTSL_THREADS": threads,
               "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        proc = subprocess.run([sys.executable, "pipeline/train.py", "--exp", "mt10_care_ptsl",
                               "--seed", "1", "--out", str(out)], cwd=root, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        run = out / "mt10_care_ptsl-1"
        outputs[threads] = {p.name: p.read_bytes() for p in sorted(run.iterdir())}
    assert list(outputs["1"]) == ["curve.csv", "model.pt", "model.pt.sha256", "summary.json"]
    for name, data in outputs["1"].items():
        assert outputs["2"][name] == data, name
