"""`dvc exp run -S pal_dim=...` re-runs only the PTSL stages that read the top-level pal_dim (and
what depends on them), never MT-SAC, Soft Modularization, CARE or PTSL rows with their own
pal_dim. Real git, DVC, Meta-World and MLflow on a tiny budget."""

from __future__ import annotations

import re

import yaml

from .pipeline_project import dvc, make_project

SMALL = {"benchmark": "reach-v3", "hidden_dim": 16, "num_layers": 2}
EXPERIMENTS = {
    "a_mtsac": {**SMALL, "method": "mtsac"},
    "a_softmod": {**SMALL, "method": "softmod"},
    "a_care": {**SMALL, "method": "care"},
    "a_care_ptsl": {**SMALL, "method": "care_ptsl"},
    "a_sac_ptsl": {**SMALL, "method": "sac_ptsl"},
    "a_care_ptsl_own": {**SMALL, "method": "care_ptsl", "pal_dim": 4},  # like the MT50 rows
}


def _ran(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


def test_pal_dim_ablation_reruns_only_ptsl_stages(tmp_path):
    root = make_project(tmp_path, EXPERIMENTS, seeds=[1], extra={"pal_dim": 6}, git=True)
    first = _ran(dvc(root, "repro").stdout)
    assert "train@a_mtsac-1" in first and "train_ptsl@a_care_ptsl-1" in first

    out = dvc(root, "exp", "run", "-S", "pal_dim=8").stdout
    ran = _ran(out)
    assert ran == {"validate", "train_ptsl@a_care_ptsl-1", "train_ptsl@a_sac_ptsl-1",
                   "evaluate_ptsl@a_care_ptsl-1", "evaluate_ptsl@a_sac_ptsl-1", "aggregate"}, out
    assert yaml.safe_load((root / "params.yaml").read_text())["pal_dim"] == 8
