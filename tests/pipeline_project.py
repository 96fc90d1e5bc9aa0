"""Build a copy of the project with a tiny budget in a temp folder, for end-to-end runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .conftest import ROOT

TINY_BUDGET: dict[str, Any] = {
    "env": {"episode_length": 20},
    "sac": {"batch_size": 32, "init_steps": 20},
    "train": {"steps": 40, "long_steps": 40, "eval_every": 20, "checkpoint_every": 20},
}


def make_project(dest: Path, experiments: dict[str, dict], seeds: list[int],
                 extra: dict[str, Any] | None = None, git: bool = False,
                 long_steps: int = 40) -> Path:
    """Copy dvc.yaml, the pins, pipeline/, src/ and data/ to ``dest``; write a tiny params.yaml with one
    table of every experiment (plus a long one if any is ``long``); ``dvc init``.

    With ``git`` the folder becomes a git repository with everything committed (``dvc exp run``
    needs one); otherwise DVC runs without SCM."""
    for name in ("dvc.yaml", "requirements.txt", "requirements", "pipeline", "src", "data"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns(
                "__pycache__", "runs", "eval", "videos", "branches"))
        else:
            shutil.copy2(src, dest / name)
    # The aggregate reads the branches_ptsl stages' folder, there even where no run has PTSL
    # layers: git keeps it through its .gitignore, as the project's.
    (dest / "data" / "branches").mkdir(exist_ok=True)
    shutil.copy2(ROOT / "data" / "branches" / ".gitignore", dest / "data" / "branches")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section, values in TINY_BUDGET.items():
        params[section].update(values)
    params["experiments"] = experiments
    from ptsl.core.config import ExperimentConfig

    ptsl = {n for n, e in experiments.items() if ExperimentConfig(**e).reads_pal_dim}
    params["runs"] = {"plain": [n for n in experiments if n not in ptsl],
                      "ptsl": [n for n in experiments if n in ptsl]}
    params["train"]["long_steps"] = long_steps
    params["seeds"] = seeds
    params["long_seeds"] = seeds[:1]
    params["tables"] = {"short": {"title": "Tiny", "rows": list(experiments), "at": "short"}}
    long_rows = [n for n, e in experiments.items() if e.get("long")]
    if long_rows:
        params["tables"]["long"] = {"title": "Tiny long", "rows": long_rows, "at": "long"}
    params["report"]["bootstrap_reps"] = 200
    params["protocol"] = "custom"  # 20-step episodes: no preset's
    for key, value in (extra or {}).items():
        params[key] = value
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if git:
        for cmd in (["init", "-q"], ["config", "user.email", "test@example.com"],
                    ["config", "user.name", "test"]):
            subprocess.run(["git", *cmd], cwd=dest, check=True, capture_output=True)
        _dvc_init(dest, no_scm=False)
        (dest / ".gitignore").write_text("mlflow.db\nmlartifacts/\n.scratch/\n__pycache__/\n"
                                         "dvc_plots/\n")
        subprocess.run(["git", "add", "-A"], cwd=dest, check=True, capture_output=True)
        subprocess.run(["git", "commit", "-qm", "tiny project"], cwd=dest, check=True,
                       capture_output=True)
    else:
        _dvc_init(dest, no_scm=True)
    return dest


def _dvc_init(dest: Path, no_scm: bool) -> None:
    """``dvc init`` (``--no-scm``) and ``dvc config plots.html_template plots/offline.html``
    through DVC's own API in this process: the files the two commands write
    (tests/unit/test_project_helper.py), without starting DVC twice per project (about 0.9 s
    of a core each). The project's plot template and offline page are copied as in its .dvc/."""
    from dvc.repo import Repo

    repo = Repo.init(dest, no_scm=no_scm)
    try:
        with repo.config.edit() as conf:
            conf["plots"]["html_template"] = "plots/offline.html"
    finally:
        repo.close()
    shutil.copytree(ROOT / ".dvc" / "plots", dest / ".dvc" / "plots", dirs_exist_ok=True)


def env_for(project: Path) -> dict[str, str]:
    """Environment for stage processes: the project venv first on PATH, MLflow on, own store,
    one torch thread (the tests run on every core at once; a run's bytes do not depend on it).
    Without the usage-reporting switches this test process set when it imported ``ptsl.ops``:
    a stage process sets them itself, as it must under a user's plain ``dvc repro``."""
    from ptsl.ops.telemetry import OFF

    env = {k: v for k, v in os.environ.items() if k not in OFF}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PTSL_TRACKING"] = "on"
    env.setdefault("PTSL_THREADS", "1")
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def dvc(project: Path, *args: str, timeout: int = 900,
        env_extra: dict[str, str] | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``dvc ARGS`` in ``project`` with :func:`env_for`'s environment and ``env_extra`` (or
    exactly ``env``); a failure raises with the end of its output."""
    proc = subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=project,
                          env=env if env is not None else {**env_for(project),
                                                           **(env_extra or {})},
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"dvc {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc
