"""Everything the pipeline reads, checked before any stage removes an output.

``dvc repro`` removes a stage's outputs before it runs the stage, and the report outputs are not
in DVC's cache, so an error found inside a stage may come too late. The ``validate`` stage runs
first (every other stage depends on its output) and checks, in one pass: the whole params file
(every key, every budget preset, the resolved config of every (experiment, seed) the pipeline
trains and the networks each experiment builds), the task-embeddings file the CARE experiments
read, and the machine's ``PTSL_*`` settings. The grid (:mod:`ptsl.ops.grid`) calls the same
check before it starts anything.

The stage's output (:data:`ptsl.ops.paths.VALIDATED`) has constant content: a passing validation
never changes it, so it never makes another stage stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from ..core.benchmarks import benchmark_tasks
from ..core.config import ExperimentConfig
from ..core.files import write_atomic
from ..core.methods import method
from .params import Params, load_params, run_config
from .paths import EMBEDDINGS, VALIDATED

STAMP = json.dumps({"valid": True, "checked": "params.yaml, task embeddings, PTSL_* settings; "
                    "see src/ptsl/ops/validate.py"}, indent=2) + "\n"


def trained_experiments(params: Params) -> dict[str, ExperimentConfig]:
    """Every experiment the pipeline trains, as its stages resolve it (top-level pal_dim filled
    in), after resolving the config of every (experiment, seed) stage."""
    out: dict[str, ExperimentConfig] = {}
    for name in params.trained:
        for seed in params.seeds:  # long seeds are a subset of seeds (config checks it)
            out[name] = run_config(params, name, seed).experiment
    return out


def check_networks(experiments: Mapping[str, ExperimentConfig]) -> None:
    """Build each experiment's networks once: a size combination the architecture cannot
    express is a ConfigError naming the experiment."""
    from ..core.builders import check_buildable  # torch: only once the params file is valid

    for exp in experiments.values():
        check_buildable(exp)


def check_embeddings(experiments: Mapping[str, ExperimentConfig], path: Path = EMBEDDINGS) -> None:
    """The embeddings file holds a vector of the right size for every task a CARE experiment
    trains on (FileNotFoundError or CorruptFileError naming the file otherwise)."""
    tasks: list[str] = []
    for exp in experiments.values():
        if method(exp.method).embeddings:
            tasks += [t for t in benchmark_tasks(exp.benchmark) if t not in tasks]
    if tasks:
        from ..core.nets.task_encoder import load_task_embeddings  # torch, as above

        load_task_embeddings(tasks, path)


def validate_project(root: Path = Path("."), params_file: str | Path = "params.yaml",
                     environ: Mapping[str, str] | None = None) -> Params:
    """Check what every stage reads (see the module docstring); returns the parsed params.

    Raises ConfigError, CorruptFileError or FileNotFoundError with a one-line message.
    """
    params = load_params(root / params_file)
    experiments = trained_experiments(params)
    check_networks(experiments)
    check_embeddings(experiments, root / EMBEDDINGS)
    # Only the values: whether a GPU is there is for the machine that trains to say (on a
    # cluster the head that runs this may have none).
    from ..core.runtime import Runtime  # torch, as above

    Runtime.from_env(environ)
    return params


def write_stamp(path: Path = VALIDATED) -> None:
    """The stage's output, rewritten only when it differs (its content never changes)."""
    path = Path(path)
    if not path.is_file() or path.read_text() != STAMP:
        write_atomic(path, STAMP)
