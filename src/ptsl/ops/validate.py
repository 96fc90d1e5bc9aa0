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

from pathlib import Path
from typing import Mapping

from ..core.benchmarks import benchmark_tasks
from ..core.config import ExperimentConfig
from ..core.errors import ConfigError
from ..core.methods import method
from .params import Params, load_params, run_config
from .paths import EMBEDDINGS
from .study import shared_path


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
    from ..core.agent.builders import check_buildable  # torch: only once the params file is valid

    for exp in experiments.values():
        check_buildable(exp)


def check_matched_sizes(params: Params, experiments: Mapping[str, ExperimentConfig]) -> None:
    """A row whose ``matches`` names another must be able to match that row's parameter count
    (the counting tool solves its hidden_dim): one whose narrowest network already has more
    parameters is refused, naming the key (say PTSL's rank at a width too small for it)."""
    from ..core.benchmarks import ACTION_DIM, num_tasks, observation_dim  # torch, as above
    from ..core.counts import count_parameters

    obs_dim = observation_dim(params.env.observation)

    def count(exp: ExperimentConfig) -> int:
        return count_parameters(exp, obs_dim, ACTION_DIM, num_tasks(exp.benchmark))

    targets: dict[str, int] = {}  # rows often match one row (CARE): build it once
    for name, exp in experiments.items():
        if exp.matches is None:
            continue
        if exp.matches not in targets:
            targets[exp.matches] = count(run_config(params, exp.matches,
                                                    params.seeds[0]).experiment)
        target = targets[exp.matches]
        # The narrowest width the architecture builds: PTSL's rank and MOORE's experts bound it.
        low = exp.pal_dim or 1
        for width in sorted({low, max(low, exp.num_experts)}):
            try:
                smallest = count(exp.model_copy(update={"hidden_dim": width}))
                break
            except ValueError:
                continue
        else:
            continue  # check_networks names what cannot be built
        if smallest > target:
            raise ConfigError(
                f"experiments.{name}.hidden_dim: no width matches experiments.{exp.matches}'s "
                f"{target:,} parameters: at hidden_dim {width} {name} already has {smallest:,}; "
                f"allowed: widen experiments.{exp.matches} or lower "
                f"{'pal_dim' if exp.pal_dim is not None else 'the PTSL rank'}")


def check_embeddings(experiments: Mapping[str, ExperimentConfig], path: Path = EMBEDDINGS) -> None:
    """The embeddings file holds a vector of the right size for every task a CARE experiment
    trains on (FileNotFoundError or CorruptFileError naming the file otherwise)."""
    tasks: list[str] = []
    for exp in experiments.values():
        if method(exp.method).embeddings:
            tasks += [t for t in benchmark_tasks(exp.benchmark) if t not in tasks]
    if tasks:
        from ..core.agent.nets.task_encoder import load_task_embeddings  # torch, as above

        load_task_embeddings(tasks, path)


def validate_project(root: Path = Path("."), params_file: str | Path = "params.yaml",
                     environ: Mapping[str, str] | None = None) -> Params:
    """Check what every stage reads (see the module docstring); returns the parsed params.

    Raises ConfigError, CorruptFileError or FileNotFoundError with a one-line message.
    """
    params = load_params(root / params_file)
    experiments = trained_experiments(params)
    check_networks(experiments)
    check_matched_sizes(params, experiments)
    check_embeddings(experiments, shared_path(EMBEDDINGS, root))  # a study's: the project's
    # Only the values: whether a GPU is there is for the machine that trains to say (on a
    # cluster the head that runs this may have none).
    from ..core.runtime import Runtime  # torch, as above

    Runtime.from_env(environ)
    return params
