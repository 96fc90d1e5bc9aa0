"""Where the pipeline reads and writes, relative to the project root (the stage's cwd).

``PTSL_SCRATCH`` moves the scratch folder: the grid's workers (``python -m ptsl.ops.grid``) point
it at the main project's, so a stage killed in one worker workspace resumes in the next one.
``PTSL_TASK_CACHE`` moves the Meta-World task cache alone (goal lists, a pure function of the
Meta-World version, benchmark and seed; MT50's take tens of seconds to generate), so that several
checkouts, studies or test projects on one machine generate each list once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..core.files import write_atomic


def task_cache_dir(scratch: Path) -> Path:
    """The Meta-World task cache of a process whose scratch folder is ``scratch``."""
    return Path(os.environ.get("PTSL_TASK_CACHE") or Path(scratch) / "tasks")


#: The project's checkout (src/ptsl/ops/ -> the root), for the API run from anywhere.
PROJECT_ROOT = Path(__file__).resolve().parents[3]
PROJECT_PARAMS = PROJECT_ROOT / "params.yaml"
RUNS = Path("data/runs")          # train outputs: <exp>-<seed>/{model.pt,curve.csv,summary.json}
EVALS = Path("data/eval")         # evaluate outputs: <exp>-<seed>.json
VIDEOS = Path("data/videos")      # evaluate outputs: <exp>-<seed>/{<task>.gif,<task>.png,index.json}
BRANCHES = Path("data/branches")  # branches_ptsl outputs: <exp>-<seed>/{branches.csv,zeroed.csv}
REPORTS = Path("reports")
SCRATCH = Path(os.environ.get("PTSL_SCRATCH") or ".scratch")  # ignored: resume checkpoints, task cache
RESUME = SCRATCH / "resume"
TASK_CACHE = task_cache_dir(SCRATCH)
PUBLISHED = Path("data/published")  # published numbers with their provenance, a file per source
EMBEDDINGS = Path("data/task_embeddings/metaworld-mt50.json")  # CARE's task descriptions
# The validate stage's output (constant content, in git): every other stage depends on it, so
# DVC runs validate first and a passing validation never makes another stage stale.
VALIDATED = Path("data/validated.json")
#: Its content. Here, not in ptsl.ops.validate, because a study's sync writes it too and
#: validate imports the study module (for the shared paths).
STAMP = json.dumps({"valid": True, "checked": "params.yaml, task embeddings, PTSL_* settings; "
                    "see src/ptsl/ops/validate.py"}, indent=2) + "\n"
# The pins of the packages that compute the results: training and evaluation depend on this
# file, and every machine that runs them must run exactly these versions.
COMPUTE_PINS = Path("requirements/compute.txt")


def write_stamp(path: Path = VALIDATED) -> None:
    """The validate stage's output, rewritten only when it differs (its content never
    changes)."""
    path = Path(path)
    if not path.is_file() or path.read_text() != STAMP:
        write_atomic(path, STAMP)


def stage_id(kind: str, experiment: str, seed: int, ptsl_group: bool) -> str:
    """The DVC stage of a run: ``train@mt10_mtsac-1``, or ``train_ptsl@...`` for the experiments
    in ``runs.ptsl`` (those reading the top-level pal_dim); ``kind`` is train, evaluate or
    branches (whose one group is ``branches_ptsl``)."""
    from ..core.records import run_id

    return f"{kind}{'_ptsl' if ptsl_group else ''}@{run_id(experiment, seed)}"


def __getattr__(name: str) -> Any:
    """``run_id`` on first use: it lives in core.records, which imports pandas (about 0.4 s), so
    the processes that never name a run (validate, check_env, the grid) start without it."""
    if name == "run_id":
        from ..core.records import run_id

        return run_id
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
