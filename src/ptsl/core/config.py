"""The configuration of one run, as typed frozen pydantic models validated once at the edge.

A section (:class:`EnvConfig`, :class:`SACConfig`, :class:`TrainConfig`, :class:`EvaluateConfig`,
:class:`ExperimentConfig`) declares each field's type, default and allowed values; unknown keys
are refused. :func:`section` validates a mapping into one and turns pydantic's report into one
:class:`~ptsl.core.errors.ConfigError` line naming the dotted key and what is allowed
(``experiments.mt10_sac.hidden_dim: must be >= 1, got 0``). :class:`RunConfig` is what one
training stage reads, resolved from the params file by :func:`resolve_run`.
"""

from __future__ import annotations

import hashlib
import json
import re
import types
import typing
from typing import Annotated, Any, Iterable, Literal, Mapping

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt,
                      StrictStr, ValidationError, model_validator)

from . import benchmarks
from .errors import ConfigError
from .methods import METHODS, RESIDUAL_MODES, method

__all__ = ["ConfigError", "EnvConfig", "EvaluateConfig", "ExperimentConfig", "RunConfig",
           "SACConfig", "TrainConfig", "check_pal_dim", "check_top_pal_dim", "config_error",
           "reads_top_pal_dim", "resolve_run", "section"]

#: Upper bound of a seed: derived seeds (seed + k) must stay inside numpy's 32-bit seed range.
MAX_SEED = 2**31 - 1


def _number(value: Any) -> Any:
    # A YAML number (int or float) and nothing else: no bool, no numeric string.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


Number = Annotated[float, BeforeValidator(_number)]
Count = Annotated[StrictInt, Field(ge=1)]
Seed = Annotated[StrictInt, Field(ge=0, le=MAX_SEED)]


class Section(BaseModel):
    """A frozen configuration section that refuses unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class EnvConfig(Section):
    """Environment protocol (reference 1.1); defaults follow the reference code."""

    episode_length: Count = Field(150, description="steps per episode (Meta-World v3 allows "
                                                   "up to 500)")
    goals: Literal["fixed", "resample"] = "fixed"
    reward_version: Literal["v1", "v2"] = "v1"
    normalize_reward: StrictBool = True
    reward_alpha: Annotated[Number, Field(gt=0.0, le=1.0)] = 0.001
    eval_ends_at_success: StrictBool = Field(
        False, description="an evaluation episode ends at its first success, each task "
                           "evaluated on its own (Meta-World+'s evaluation); false: every "
                           "episode runs its full length, tasks in lock-step (the reference's)")
    observation: Literal["full", "v1"] = Field(
        "full", description="full: Meta-World v3's 39 numbers; v1: the 12 of the paper's "
                            "Meta-World v1 (hand xyz, object xyz padded to 6, goal xyz)")


class SACConfig(Section):
    """Multi-task SAC hyper-parameters (reference 1.4)."""

    discount: Annotated[Number, Field(gt=0.0, le=1.0)] = 0.99
    init_temperature: Annotated[Number, Field(gt=0.0)] = 1.0
    actor_lr: Annotated[Number, Field(gt=0.0)] = 3e-4
    critic_lr: Annotated[Number, Field(gt=0.0)] = 3e-4
    alpha_lr: Annotated[Number, Field(gt=0.0)] = 3e-4
    task_encoder_lr: Annotated[Number, Field(gt=0.0)] = 3e-4
    tau: Annotated[Number, Field(gt=0.0, le=1.0)] = 0.005
    encoder_tau: Annotated[Number, Field(gt=0.0, le=1.0)] = 0.05
    batch_size: Count = 1280
    buffer_capacity: Count = 1_000_000
    init_steps: Count = Field(1500, description="random vector steps, then as many updates "
                                                "at once")
    log_std_min: Number = -20.0
    log_std_max: Number = 2.0
    critic_loss_guard: Annotated[Number, Field(gt=0.0)] = 1e8
    sizes_per_task: StrictBool = Field(False, description="batch_size and buffer_capacity count "
                                                          "per task (Meta-World+: 128 and "
                                                          "100,000 per task); false: in total")
    q_clip: Annotated[Number, Field(gt=0.0)] | None = Field(
        None, description="clip TD targets and Q predictions to [-q_clip, q_clip] in the critic "
                          "loss (the published PaCo runs: 5000); null: no clip")

    @model_validator(mode="after")
    def _log_std_order(self) -> "SACConfig":
        if self.log_std_min >= self.log_std_max:
            raise ValueError(f"log_std_min: must be < sac.log_std_max ({self.log_std_max:g}), "
                             f"got {self.log_std_min:g}")
        return self

    def totals(self, num_tasks: int) -> "SACConfig":
        """This config with ``batch_size`` and ``buffer_capacity`` as totals over ``num_tasks``
        tasks: itself unless ``sizes_per_task``."""
        if not self.sizes_per_task:
            return self
        return self.model_copy(update={"batch_size": self.batch_size * num_tasks,
                                       "buffer_capacity": self.buffer_capacity * num_tasks,
                                       "sizes_per_task": False})


class TrainConfig(Section):
    """Training-loop budget: counts are vector steps (one step of every task), as in the reference."""

    steps: Count = Field(description="the short reported step (paper: 200k)")
    eval_every: Count
    checkpoint_every: Count = Field(description="vector steps between scratch (resume) "
                                                "checkpoints")
    long_steps: Count | None = Field(None, description="the long reported step (paper: 1M), "
                                                       "for long experiments; unset means steps")
    eval_episodes: Count = 1
    eval_stride: Count = Field(1, description="evaluate at every eval_stride-th multiple of "
                                              "eval_every (the protocol's cadence: "
                                              "metaworld-plus evaluates half as often)")

    @property
    def eval_interval(self) -> int:
        """Vector steps between evaluations."""
        return self.eval_every * self.eval_stride

    @model_validator(mode="before")
    @classmethod
    def _one_reported_step(cls, data: Any) -> Any:
        # A run without long seeds reports one step: long_steps unset means steps.
        if isinstance(data, Mapping) and data.get("long_steps") is None and "steps" in data:
            return {**data, "long_steps": data["steps"]}
        return data


class EvaluateConfig(Section):
    """Evaluation stage: deterministic episodes per task from the final checkpoint."""

    episodes: Count = 1
    videos: StrictBool = Field(False, description="record one deterministic episode per task "
                                                  "(GIF) and a contact sheet under "
                                                  "reports/videos/; needs off-screen MuJoCo "
                                                  "rendering (MUJOCO_GL=egl or osmesa)")


MethodName = Literal[tuple(METHODS)]  # type: ignore[valid-type]


class ExperimentConfig(Section):
    """One row of a table: benchmark, method and network sizes. Options that only some methods
    read (:mod:`ptsl.core.methods`) must keep their defaults on the others."""

    benchmark: StrictStr = Field(description=benchmarks.ALLOWED)
    method: MethodName
    hidden_dim: Count = 400
    num_layers: Count = 3
    task_onehot: StrictBool = Field(False, description="MT-SAC and MT-MH-SAC: append a task "
                                                       "one-hot (garage's and Meta-World+'s "
                                                       "variant)")
    num_experts: Count = Field(4, description="CARE encoders / Soft Modularization modules / "
                                              "MOORE experts")
    num_parameter_sets: Count = Field(5, description="PaCo: parameter sets per layer (K; "
                                                     "Meta-World+'s default and MT10 run 5, its "
                                                     "MT50 run 20)")
    pal_dim: Count | None = Field(None, description="PTSL rank, at most hidden_dim; unset "
                                                    "reads the top-level pal_dim")
    shared_projection: StrictBool = Field(True, description="PTSL: one D/U pair shared across "
                                                            "layers")
    residual_mode: Literal[RESIDUAL_MODES] = "none"  # type: ignore[valid-type]
    matches: StrictStr | None = Field(None, description="experiment whose parameter count "
                                                        "hidden_dim was solved to match (checked "
                                                        "by the tests)")
    long: StrictBool = Field(False, description="seeds in long_seeds train to train.long_steps "
                                                "(1M tables)")
    label: StrictStr = Field("", description="row label in tables and figures (default: the "
                                             "experiment name)")
    name: StrictStr = Field("", description="the experiment's key in params.yaml (set by the "
                                            "parser, not in the file)")

    @model_validator(mode="after")
    def _benchmark_and_options(self) -> "ExperimentConfig":
        if not benchmarks.is_benchmark(self.benchmark):
            raise ValueError(f"benchmark: unknown benchmark {self.benchmark!r}; allowed: "
                             f"{benchmarks.ALLOWED}")
        spec = method(self.method)
        for option in spec.unread_options():
            default = ExperimentConfig.model_fields[option].default
            if getattr(self, option) != default:
                readers = [m.name for m in METHODS.values() if option in m.options]
                raise ValueError(f"{option}: only {'method' if len(readers) == 1 else 'methods'} "
                                 f"{', '.join(readers)} {'reads' if len(readers) == 1 else 'read'}"
                                 f" it; remove it from {self.method} experiments")
        if self.residual_mode not in spec.residual_modes:
            raise ValueError(f"residual_mode: {self.residual_mode!r} needs a down-projection in "
                             f"every layer, which {self.method} does not have; allowed for "
                             f"{self.method}: {', '.join(spec.residual_modes)}")
        if self.pal_dim is not None:
            check_pal_dim(self.pal_dim, self.hidden_dim)
        return self

    @property
    def reads_pal_dim(self) -> bool:
        """Whether this experiment reads the top-level pal_dim (:func:`reads_top_pal_dim`)."""
        return reads_top_pal_dim(self.method, self.pal_dim)


# The top-level pal_dim: which experiments read it and how large it may be. The params parser
# (ptsl.ops.params) and the Python API (ptsl.api) use these two; the rule is written only here.


def reads_top_pal_dim(method_name: str, pal_dim: int | None) -> bool:
    """Whether an experiment of method ``method_name`` whose own ``pal_dim`` is ``pal_dim``
    (None: unset) reads the params file's top-level pal_dim: exactly the PTSL experiments
    without their own. Their stages form the DVC group ``train_ptsl``, the one that lists the
    top-level key, so ``dvc exp run -S pal_dim=...`` re-runs them and no other row. An unknown
    method reads nothing (its name is refused where the experiment is parsed)."""
    return method_name in METHODS and METHODS[method_name].ptsl and pal_dim is None


def check_pal_dim(pal_dim: int, hidden_dim: int, reader: str | None = None) -> None:
    """PTSL's rank bound: ``pal_dim`` at most the ``hidden_dim`` of the experiment that uses it.
    ``reader``: the experiment that reads the top-level pal_dim with the smallest hidden_dim
    (None: ``pal_dim`` is the experiment's own). Raises a one-line :class:`ConfigError`."""
    if pal_dim <= hidden_dim:
        return
    # The PTSL rank projects the hidden layer down; a larger rank adds parameters and no
    # expressiveness (and makes the shared projections wider than the layer they compress).
    if reader is None:
        raise ConfigError(f"pal_dim: must be <= hidden_dim ({hidden_dim}), got {pal_dim}")
    raise ConfigError(f"pal_dim: must be <= {hidden_dim}, the hidden_dim of experiment {reader} "
                      f"which reads it; got {pal_dim}")


def check_top_pal_dim(pal_dim: int, experiments: Iterable[ExperimentConfig]) -> None:
    """The top-level ``pal_dim`` against every experiment of ``experiments`` that reads it (the
    one with the smallest hidden_dim is named when it is too large)."""
    readers = [e for e in experiments if e.reads_pal_dim]
    if readers:
        smallest = min(readers, key=lambda e: e.hidden_dim)
        check_pal_dim(pal_dim, smallest.hidden_dim, smallest.name)


# Keys that older saved agents carry in their config; the machine now chooses them
# (:mod:`ptsl.core.runtime`), so they are dropped when such an agent is loaded.
_RETIRED_KEYS = {"train": ("device", "torch_threads"), "env": ("vector",)}

# Keys added after runs were recorded, left out of a config's dict while at their default: the
# dict is saved in every model.pt and keys its resume checkpoints, so a run that does not set
# one keeps the bytes it had before the key existed.
_OMITTED_AT_DEFAULT = {"env": ("observation",)}


class RunConfig(BaseModel):
    """Everything one training run reads: the resolved config of one (experiment, seed) stage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: StrictStr
    seed: Seed
    experiment: ExperimentConfig
    env: EnvConfig
    sac: SACConfig
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for checkpoints, saved agents and MLflow params); a key of
        ``_OMITTED_AT_DEFAULT`` appears only when set to another value than its default."""
        data = self.model_dump()
        for name, keys in _OMITTED_AT_DEFAULT.items():
            fields = type(getattr(self, name)).model_fields
            for key in keys:
                if data[name][key] == fields[key].default:
                    del data[name][key]
        return data

    def headline(self) -> dict[str, Any]:
        """The few values a reader compares runs by (short MLflow param names)."""
        exp = self.experiment
        out: dict[str, Any] = {"experiment": self.name, "method": exp.method,
                               "benchmark": exp.benchmark, "seed": self.seed,
                               "hidden_dim": exp.hidden_dim, "num_layers": exp.num_layers}
        if exp.pal_dim is not None:
            out["pal_dim"] = exp.pal_dim
        return out

    def key(self) -> str:
        """Stable hash of the resolved config; keys the scratch resume checkpoint."""
        blob = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "RunConfig":
        """Inverse of :meth:`to_dict` (used when loading a saved agent)."""
        kept = {name: {k: v for k, v in data[name].items() if k not in retired}
                for name, retired in _RETIRED_KEYS.items()}
        return section(RunConfig, {**data, **kept}, "config")


def resolve_run(name: str, seed: int, experiment: ExperimentConfig, env: EnvConfig,
                sac: SACConfig, train: TrainConfig, pal_dim: int,
                long_seeds: tuple[int, ...]) -> RunConfig:
    """The config one training stage trains: the experiment's ``pal_dim`` filled in from the
    top-level one when it reads it, and a long experiment's long seeds trained to
    ``train.long_steps`` (200k and 1M figures come from one run's curve)."""
    if experiment.reads_pal_dim:
        experiment = experiment.model_copy(update={"pal_dim": pal_dim})
    if experiment.long and seed in long_seeds:
        train = train.model_copy(update={"steps": train.long_steps})
    return RunConfig(name=name, seed=seed, experiment=experiment, env=env, sac=sac, train=train)


# --------------------------------------------------------------------------------------------
# One line per validation failure


def section(model: type[BaseModel], data: Any, key: str) -> Any:
    """``data`` validated into ``model``; a failure is one :class:`ConfigError` under ``key``."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{key}: expected a mapping, got {data!r}")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise config_error(exc, model, key) from None


_TYPES = {"bool_type": "expected true or false", "int_type": "expected an integer",
          "string_type": "expected a string", "tuple_type": "expected a list",
          "list_type": "expected a list", "float_type": "expected a number",
          "dict_type": "expected a mapping", "model_type": "expected a mapping"}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
           "less_than_equal": "<="}


def config_error(exc: ValidationError, model: type[BaseModel], key: str) -> ConfigError:
    """The first of pydantic's errors as one line: ``<dotted key>: <what is wrong>``."""
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"] if not isinstance(p, int)]  # list positions: the list's key
    where = ".".join([key, *loc]) if key else ".".join(loc)
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "value_error":  # our validators: "<field>: <message>" relative to the model
        text = str(ctx.get("error", err["msg"]))
        field, sep, rest = text.partition(": ")
        if sep and re.fullmatch(r"\w+", field):
            return ConfigError(f"{where}.{field}: {rest}" if where else text)
        return ConfigError(f"{where}: {text}")
    if kind == "missing":
        return ConfigError(f"{where}: missing required key")
    if kind == "extra_forbidden":
        allowed = _fields_at(model, err["loc"][:-1])
        return ConfigError(f"{where}: unknown key; allowed: {', '.join(allowed)}")
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return ConfigError(f"{where}: unknown value {value!r}; allowed: {', '.join(allowed)}")
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()))
        return ConfigError(f"{where}: must be {_BOUNDS[kind]} {bound}, got {value}")
    if kind in _TYPES:
        return ConfigError(f"{where}: {_TYPES[kind]}, got {value!r}")
    return ConfigError(f"{where}: {err['msg']}, got {value!r}")


def _fields_at(model: Any, loc: tuple) -> list[str]:
    """Field names of the model found at ``loc`` inside ``model`` (through mappings, lists and
    optional fields)."""
    tp = model
    for part in loc:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            tp = tp.model_fields[part].annotation
        else:
            args = typing.get_args(tp)
            tp = args[-1] if args else tp
        while typing.get_origin(tp) in (typing.Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []
