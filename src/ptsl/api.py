"""The Python API: build an environment, configure, train, evaluate and act in a few lines.

::

    from ptsl import evaluate, make_config, train

    config = make_config("mtsac", "reach-v3", hidden_dim=64, steps=300, eval_every=150)
    result = train(config)                      # result.agent, result.curve
    print(evaluate(result.agent).mean_success)
    action = result.agent.predict(obs, task)    # the familiar name for agent.act

Every function is a thin layer over what the pipeline's stages run (:mod:`ptsl.core` for the
computation, :mod:`ptsl.ops.params` for the params file), so a run started here with an
experiment's settings is the stage's run, byte for byte on CPU. Arguments are validated by the
pipeline's own rules; a bad one raises :class:`ptsl.core.errors.ConfigError` with one line that
names the argument and what is allowed. No stage imports this module, so editing it re-trains
nothing.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .core import benchmarks
from .core.agent.builders import check_buildable
from .core.agent.sac import MultiTaskSAC
from .core.config import (EnvConfig, EvaluateConfig, RunConfig, SACConfig, reads_top_pal_dim,
                          section)
from .core.envs import MultiTaskVecEnv, load_tasks
from .core.errors import ConfigError
from .core.eval_tasks import TaskEvaluator
from .core.evaluation import evaluate as _evaluate
from .core.evaluation import evaluator
from .core.files import folder_aside
from .core.log import RunLog
from .core.loop import TrainResult
from .core.loop import train as _train
from .core.persistence import load_agent
from .core.runtime import Runtime
from .ops.params import apply_preset, load_params, parse_params, read_yaml, run_config
from .ops.paths import PROJECT_PARAMS, TASK_CACHE

__all__ = ["BUDGETS", "Evaluation", "TrainResult", "config_from_params", "evaluate", "load_agent",
           "make_config", "make_env", "train"]


@functools.cache
def budgets() -> Mapping[str, Mapping[str, Any]]:
    """The budget presets (``small``, ``paper``) in their dotted-key form, read from the
    project's params.yaml (``budgets:``), the one place they are stated. ``ptsl.BUDGETS`` is
    this mapping."""
    if not PROJECT_PARAMS.is_file():
        raise ConfigError(f"budget: the presets are read from {PROJECT_PARAMS}, which is missing; "
                          "restore it with `git checkout -- params.yaml`")
    return parse_params(read_yaml(PROJECT_PARAMS)).budgets


@functools.cache
def protocols() -> Mapping[str, Mapping[str, Any]]:
    """The protocol presets (``reference``, ``metaworld-plus``) in their dotted-key form, read
    from the project's params.yaml (``protocols:``)."""
    if not PROJECT_PARAMS.is_file():
        raise ConfigError(f"protocol: the presets are read from {PROJECT_PARAMS}, which is "
                          "missing; restore it with `git checkout -- params.yaml`")
    return parse_params(read_yaml(PROJECT_PARAMS)).protocols


def __getattr__(name: str) -> Any:
    if name == "BUDGETS":
        return budgets()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Pipeline keys that a :func:`make_config` argument of another name sets.
_ARGUMENT_OF = {"train.steps": "steps", "train.long_steps": "steps",
                "train.eval_every": "eval_every", "train.checkpoint_every": "checkpoint_every",
                "train.eval_episodes": "eval_episodes", "sac.batch_size": "batch_size",
                "sac.init_steps": "init_steps", "--exp": "experiment",
                "evaluate.episodes": "episodes"}


def _renamed(exc: ConfigError, experiment: str | None = None) -> ConfigError:
    """The pipeline's message with its leading key replaced by the API argument that set it
    (``experiments.<name>.method`` -> ``method``, ``sac.batch_size`` -> ``batch_size``)."""
    key, sep, rest = str(exc).partition(": ")
    if not sep:
        return exc
    own = f"experiments.{experiment}"
    if experiment is not None and key == own:
        key = "make_config"  # a combination of arguments, not one argument
    elif experiment is not None and key.startswith(own + "."):
        key = key[len(own) + 1:]
    else:
        key = _ARGUMENT_OF.get(key, key)
    if experiment is not None:  # make_config: its messages speak of its arguments throughout
        for pipeline_key, argument in _ARGUMENT_OF.items():
            rest = rest.replace(pipeline_key, argument)
    return ConfigError(f"{key}: {rest}")


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed: expected an integer >= 0, got {seed!r}")
    return seed


def _as_mapping(value: Any, cls: type, arg: str) -> dict[str, Any]:
    """``None``, an instance of ``cls`` or a mapping of some of its keys, as a plain dict."""
    if value is None:
        return {}
    if isinstance(value, cls):
        return value.model_dump()
    if isinstance(value, Mapping):
        return dict(value)
    raise ConfigError(f"{arg}: expected a {cls.__name__} or a mapping of its keys, got {value!r}")


# --------------------------------------------------------------------------------------------
# Environment


def make_env(benchmark: str = "mt10", seed: int = 1, *,
             env: EnvConfig | Mapping[str, Any] | None = None, evaluation: bool = False,
             task_cache: str | Path | None = TASK_CACHE,
             vector: str = "sync") -> MultiTaskVecEnv | TaskEvaluator:
    """The multi-task vector environment of ``benchmark`` for ``seed``, under the project's protocol.

    ``benchmark`` is ``mt10``, ``mt50`` or one Meta-World v3 task such as ``reach-v3``; row ``i``
    of every observation batch is task ``i`` (``env.task_ids``, names in ``env.tasks.names``).
    Goals are drawn from ``seed`` exactly as in training. ``env`` overrides protocol settings
    (an :class:`EnvConfig` or a mapping of its keys, e.g. ``{"episode_length": 50}``).
    ``evaluation=True`` builds what evaluation steps: raw rewards, tasks stepped in this process
    (with ``eval_ends_at_success``, a :class:`ptsl.core.eval_tasks.TaskEvaluator`, which only
    :func:`evaluate` reads).
    Meta-World's goal lists are cached in ``task_cache`` (``.scratch/tasks`` under the current
    folder; ``None`` for no cache). ``vector="async"`` steps each task in its own process (the
    same transitions). Call ``close()`` when done.
    """
    if not isinstance(benchmark, str) or not benchmarks.is_benchmark(benchmark):
        raise ConfigError(f"benchmark: unknown benchmark {benchmark!r}; allowed: "
                          f"{benchmarks.ALLOWED}")
    seed = _check_seed(seed)
    if vector not in ("sync", "async"):
        raise ConfigError(f"vector: unknown mode {vector!r}; allowed: sync, async")
    env_cfg = section(EnvConfig, _as_mapping(env, EnvConfig, "env"), "env")
    tasks = load_tasks(benchmark, seed, None if task_cache is None else Path(task_cache))
    if evaluation:
        return evaluator(tasks, env_cfg, seed)
    return MultiTaskVecEnv(tasks, env_cfg, seed, vector=vector)


# --------------------------------------------------------------------------------------------
# Configuration


def config_from_params(experiment: str, seed: int,
                       params: str | Path = "params.yaml") -> RunConfig:
    """The config stage ``train@<experiment>-<seed>`` trains, resolved from a params file.

    Exactly what ``pipeline/train.py`` does: the whole file is validated, the top-level
    ``pal_dim`` filled in for PTSL experiments, long seeds of ``long: true`` experiments set to
    ``train.long_steps``. :func:`train` on the result gives the stage's curve byte for byte (CPU).
    """
    seed = _check_seed(seed)
    loaded = load_params(params)  # its errors name params-file keys, kept as they are
    try:
        cfg = run_config(loaded, experiment, seed)
    except ConfigError as exc:
        raise _renamed(exc) from None
    check_buildable(cfg.experiment)
    return cfg


def make_config(method: str = "mtsac", benchmark: str = "mt10", seed: int = 1, *,
                hidden_dim: int = 400, num_layers: int = 3, pal_dim: int | None = None,
                shared_projection: bool = True, residual_mode: str = "none",
                num_experts: int = 4, num_parameter_sets: int = 5, task_onehot: bool = False,
                budget: str = "small",
                protocol: str = "reference",
                steps: int | None = None, eval_every: int | None = None,
                batch_size: int | None = None, init_steps: int | None = None,
                checkpoint_every: int | None = None, eval_episodes: int | None = None,
                env: EnvConfig | Mapping[str, Any] | None = None,
                sac: SACConfig | Mapping[str, Any] | None = None,
                name: str | None = None) -> RunConfig:
    """A run configuration from a few keyword arguments, with the paper's defaults.

    - ``method``: ``mtsac``, ``softmod``, ``care``, ``care_ptsl``, ``sac_ptsl``, ``mhsac``,
      ``moore`` or ``paco`` (:data:`ptsl.core.methods.METHODS`); ``benchmark``: ``mt10``,
      ``mt50`` or one Meta-World v3 task (``reach-v3``).
    - Networks: ``hidden_dim`` x ``num_layers`` (the paper's 400 x 3), ``num_experts`` (CARE,
      Soft Modularization, MOORE), ``num_parameter_sets`` (PaCo), PTSL's ``pal_dim`` (default
      50, the top-level value of
      ``params.yaml``), ``shared_projection`` and ``residual_mode``; ``task_onehot`` (MT-SAC,
      MT-MH-SAC).
    - Protocol: ``protocol`` picks a preset of :func:`protocols` (``reference`` or
      ``metaworld-plus``) for the environment and the evaluation episodes (``eval_episodes``
      and ``env`` override it).
    - Budget: ``budget`` picks a preset of :func:`budgets` (``small`` or ``paper``, read from
      ``params.yaml``) for ``batch_size``, ``init_steps``, ``steps``, ``eval_every`` and
      ``checkpoint_every``; each of them may be given to override it.
    - ``env`` and ``sac`` override the protocol and the other SAC values (an :class:`EnvConfig` /
      :class:`SACConfig` or a mapping of some of their keys); defaults are ``params.yaml``'s.

    The arguments go through the pipeline's parser (:func:`ptsl.ops.params.parse_params`), so every
    rule of ``params.yaml`` holds (``steps`` a multiple of ``eval_every``, PTSL options only on
    PTSL methods, ...) and a violation is a :class:`ConfigError` naming the argument.

    Why a stand-in ``params.yaml`` mapping, not the :class:`RunConfig` built directly: the
    presets are dotted keys of that file (``train.steps``, ``env.episode_length``) applied to
    its mapping, and the rules across its sections (``steps`` a multiple of the evaluation
    interval, the top-level ``pal_dim`` within the width of each experiment that reads it) are
    written once, in ``parse_params``; a direct build would write them a second time.
    """
    presets = budgets()
    if budget not in presets:
        raise ConfigError(f"budget: unknown budget {budget!r}; allowed: {', '.join(presets)}")
    seed = _check_seed(seed)
    name = name if name is not None else f"{benchmark}_{method}"
    exp: dict[str, Any] = {
        "benchmark": benchmark, "method": method, "hidden_dim": hidden_dim,
        "num_layers": num_layers, "num_experts": num_experts,
        "num_parameter_sets": num_parameter_sets, "task_onehot": task_onehot,
        "shared_projection": shared_projection, "residual_mode": residual_mode}
    if pal_dim is not None:
        exp["pal_dim"] = pal_dim
    ptsl_group = reads_top_pal_dim(method, pal_dim)  # runs.ptsl, else runs.plain
    protocol_presets = protocols()
    if protocol not in protocol_presets:
        raise ConfigError(f"protocol: unknown protocol {protocol!r}; allowed: "
                          f"{', '.join(protocol_presets)}")
    raw: dict[str, Any] = {
        "env": EnvConfig().model_dump(),
        "sac": {"batch_size": None, "init_steps": None},
        "train": {"steps": None, "long_steps": None, "eval_every": None,
                  "checkpoint_every": None, "eval_episodes": None, "eval_stride": None},
        "evaluate": {"episodes": None},
        "experiments": {name: exp},
        "runs": {"plain": [] if ptsl_group else [name], "ptsl": [name] if ptsl_group else []},
        "seeds": None, "long_seeds": None,
    }
    raw = apply_preset(raw, protocol_presets[protocol], f"protocols.{protocol}")
    raw = apply_preset(raw, presets[budget], f"budgets.{budget}")
    raw["env"].update(_as_mapping(env, EnvConfig, "env"))
    if eval_episodes is not None:
        raw["train"]["eval_episodes"] = eval_episodes
    raw["sac"].update(_as_mapping(sac, SACConfig, "sac"))
    for part, key, value in (("sac", "batch_size", batch_size),
                             ("sac", "init_steps", init_steps), ("train", "steps", steps),
                             ("train", "eval_every", eval_every),
                             ("train", "checkpoint_every", checkpoint_every)):
        if value is not None:
            raw[part][key] = value
    raw["train"]["long_steps"] = raw["train"]["steps"]  # one run, one reported step
    raw["seeds"] = raw["long_seeds"] = [seed]
    try:
        cfg = run_config(parse_params(raw, check_presets=False), name, seed)
        check_buildable(cfg.experiment)
    except ConfigError as exc:
        raise _renamed(exc, name) from None
    return cfg


# --------------------------------------------------------------------------------------------
# Training and evaluation


def train(config: RunConfig, *, callback: Callable[[dict[str, float]], None] | None = None,
          resume_dir: str | Path | None = None, progress: bool = True,
          runtime: Runtime | None = None, log: RunLog | None = None,
          task_cache: str | Path | None = TASK_CACHE) -> TrainResult:
    """Train ``config`` (from :func:`make_config` or :func:`config_from_params`) to its steps.

    Returns :class:`ptsl.core.loop.TrainResult`: ``agent`` (a :class:`MultiTaskSAC`), ``curve`` (a
    DataFrame, one row per evaluation: ``step``, ``env_steps``, ``success``, ``return``,
    ``success/<task>``), ``parameter_count``, ``wall_seconds``, ``resumed_from``.

    ``callback(row)`` is called after every evaluation with that curve row. With ``resume_dir``
    the run checkpoints there every ``train.checkpoint_every`` steps, keyed by the resolved
    config, and an interrupted run started again with the same config resumes and ends with the
    same bytes, as the stages do (they use ``.scratch/resume``). ``runtime`` (device, threads)
    defaults to the ``PTSL_*`` environment variables, except that the environments step in the
    calling process unless ``PTSL_VECTOR`` asks otherwise (worker processes would need the
    script's ``if __name__ == "__main__":`` guard); ``log`` (a :class:`ptsl.core.log.RunLog`,
    such as an MLflow run from :func:`ptsl.ops.tracking.start_run`) defaults to none.
    """
    if not isinstance(config, RunConfig):
        raise ConfigError(f"config: expected a RunConfig (from make_config or "
                          f"config_from_params), got {type(config).__name__}")
    check_buildable(config.experiment)
    if runtime is None:
        runtime = Runtime.from_env({"PTSL_VECTOR": "sync", **os.environ})
    return _train(config, scratch_dir=None if resume_dir is None else Path(resume_dir),
                  task_cache=None if task_cache is None else Path(task_cache), log=log,
                  progress=progress, runtime=runtime, on_eval=callback)


@dataclass(frozen=True)
class Evaluation:
    """Deterministic evaluation of an agent: success rate and mean raw return per task.

    Success means success at any step of an episode (the paper's metric); the headline number
    is :attr:`mean_success`, the mean over tasks.
    """

    success: Mapping[str, float]   # task name -> success rate over the episodes
    returns: Mapping[str, float]   # task name -> mean summed raw reward
    episodes: int
    #: task name -> rollout GIF, when ``evaluate(..., videos=folder)`` recorded them
    videos: Mapping[str, Path] | None = None

    @property
    def mean_success(self) -> float:
        """Mean over tasks of the success rate."""
        return float(np.mean(list(self.success.values())))

    @property
    def mean_return(self) -> float:
        """Mean over tasks of the episode return."""
        return float(np.mean(list(self.returns.values())))


def evaluate(agent: MultiTaskSAC, env: MultiTaskVecEnv | str | None = None, *,
             seed: int | None = None, episodes: int = 1,
             task_cache: str | Path | None = TASK_CACHE,
             videos: str | Path | None = None) -> Evaluation:
    """Run ``episodes`` deterministic episodes of every task and report success and return.

    ``env`` is ``None`` (the agent's own benchmark, seed and protocol: what the evaluate stage
    runs), a benchmark name (built with ``seed``, default the agent's, and the agent's protocol)
    or a :class:`MultiTaskVecEnv` from :func:`make_env` (used as is and left open). The
    environment's tasks must be the ones the agent was trained on, in the same order.

    ``videos``: a folder that receives one deterministic episode per task as a GIF (what the
    evaluate stage records with ``evaluate.videos: true``; its paths are in
    :attr:`Evaluation.videos`). MuJoCo renders off-screen through EGL or OSMesa; where neither
    works, one line says how to enable one and the evaluation goes on without videos.
    """
    if not isinstance(agent, MultiTaskSAC):
        raise ConfigError(f"agent: expected a MultiTaskSAC (train(...).agent or load_agent), "
                          f"got {type(agent).__name__}")
    try:
        episodes = section(EvaluateConfig, {"episodes": episodes}, "evaluate").episodes
    except ConfigError as exc:
        raise _renamed(exc) from None
    trained_on = tuple(agent.meta.get("task_names", ()))
    own = agent.meta.get("config")
    if isinstance(env, MultiTaskVecEnv):
        if seed is not None:
            raise ConfigError("seed: the environment given already has its goals; pass seed "
                              "only with env=None or a benchmark name")
        vec, close = env, False
    else:
        if own is None:
            raise ConfigError("env: this agent carries no config to build its environment "
                              "from; pass an environment from make_env")
        cfg = RunConfig.from_dict(own)
        if env is not None and not isinstance(env, str):
            raise ConfigError(f"env: expected None, a benchmark name or a MultiTaskVecEnv, "
                              f"got {type(env).__name__}")
        vec = make_env(env or cfg.experiment.benchmark, cfg.seed if seed is None else seed,
                       env=cfg.env, evaluation=True, task_cache=task_cache)
        close = True
    try:
        if trained_on and tuple(vec.tasks.names) != trained_on:
            raise ConfigError(f"env: the agent was trained on {', '.join(trained_on)}; the "
                              f"environment has {', '.join(vec.tasks.names)}")
        res = _evaluate(agent, vec, episodes)
    finally:
        if close:
            vec.close()
    names = vec.tasks.names
    return Evaluation(success={n: float(s) for n, s in zip(names, res.success)},
                      returns={n: float(r) for n, r in zip(names, res.returns)},
                      episodes=episodes,
                      videos=None if videos is None else _record(agent, vec, seed, Path(videos)))


def _record(agent: MultiTaskSAC, vec: MultiTaskVecEnv, seed: int | None,
            out: Path) -> Mapping[str, Path] | None:
    """Rollout GIFs of every task into ``out`` (the evaluate stage's recorder), or None with
    one line on stderr when MuJoCo has no off-screen renderer here."""
    import sys

    from .core import rollouts

    own = agent.meta.get("config")
    if own is None:
        raise ConfigError("videos: this agent carries no config (protocol, seed) to record with")
    cfg = RunConfig.from_dict(own)
    backend = rollouts.find_backend()
    if backend is None:
        print(rollouts.no_backend_message(), file=sys.stderr)
        return None
    rollouts.use_backend(backend)
    with folder_aside(out, "rollout videos") as staged:
        rollouts.record_videos(agent, vec.tasks, cfg.env, cfg.seed if seed is None else seed,
                               staged)
    return {n: out / f"{n}.gif" for n in vec.tasks.names}
