"""`dvc exp run -S pal_dim=...` re-runs only the PTSL stages that read the top-level pal_dim (and
what depends on them), never the plain methods' rows or PTSL rows with their own pal_dim. Real git, DVC,
Meta-World and MLflow on a tiny budget."""

from __future__ import annotations

import json
import re
import subprocess

import yaml

from ptsl.ops.exps import read_columns, render

from ..pipeline_project import dvc, make_project

SMALL = {"benchmark": "reach-v3", "hidden_dim": 16, "num_layers": 2}
# One row of each kind: the plain group (every non-PTSL method is in it the same way; which
# method reads pal_dim is checked in tests/unit/test_config.py), a PTSL row reading the top-level pal_dim,
# and a PTSL row with its own, like the MT50 rows.
EXPERIMENTS = {
    "a_mtsac": {**SMALL, "method": "mtsac"},
    "a_sac_ptsl": {**SMALL, "method": "sac_ptsl"},
    "a_care_ptsl_own": {**SMALL, "method": "care_ptsl", "pal_dim": 4},
}


PTSL_ROWS = ("a_sac_ptsl",)
# What DVC re-runs is under test here, not MLflow (tests/e2e/test_methods_e2e.py checks the runs
# name their stages): tracking off saves each stage process MLflow's start-up.
NO_TRACKING = {"PTSL_TRACKING": "off"}  # the rows reading the top-level pal_dim


def _ran(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


def test_pal_dim_ablation_reruns_only_ptsl_stages(tmp_path):
    root = make_project(tmp_path, EXPERIMENTS, seeds=[1], extra={"pal_dim": 6}, git=True)
    first = _ran(dvc(root, "repro", env_extra=NO_TRACKING).stdout)
    assert "train@a_mtsac-1" in first and "train_ptsl@a_sac_ptsl-1" in first
    for cmd in (["add", "-A"], ["commit", "-qm", "repro"]):  # the baseline holds its numbers
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)

    out = dvc(root, "exp", "run", "-S", "pal_dim=8", env_extra=NO_TRACKING).stdout
    ran = _ran(out)
    assert ran == {"validate", "train_ptsl@a_sac_ptsl-1", "evaluate_ptsl@a_sac_ptsl-1",
                   "branches_ptsl@a_sac_ptsl-1", "aggregate"}, out
    assert yaml.safe_load((root / "params.yaml").read_text())["pal_dim"] == 8

    # The views the README gives for it fit a 120-column terminal and show what changed.
    shown = dvc(root, "exp", "show", "--only-changed", "--drop", "Created|.*/",
                env_extra={"COLUMNS": "120"}).stdout
    assert "pal_dim" in shown and "…" not in shown, shown
    assert max(map(len, shown.splitlines())) <= 120, shown

    cols = read_columns(root)
    names = [c.name for c in cols]
    assert names[:2] == ["workspace", "master"] and len(names) == 3, names
    view = render(cols, width=120)
    assert max(map(len, view.splitlines())) <= 120, view
    assert re.search(r"^  pal_dim +8 +6 +8$", view, re.M), view
    for row in EXPERIMENTS:  # the workspace holds the experiment's results: its own files
        short = json.loads((root / "reports" / "metrics" / f"{row}.json").read_text())["short"]
        line = next(ln for ln in view.splitlines() if ln.startswith(f"  {row} "))
        assert line.split()[1:] == [f"{short:.3f}"] * 3 or row in PTSL_ROWS, (row, line)
        assert line.split()[1] == line.split()[3] == f"{short:.3f}", (row, line)
    changed = render(cols, only_changed=True, width=120)
    assert "pal_dim" in changed and "a_mtsac" not in changed, changed
