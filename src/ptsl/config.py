"""Typed, frozen configuration built from ``params.yaml`` and validated once, at the edge.

Every field declares its type and, where it matters, its allowed values or range in the field
metadata. :func:`build` turns a plain mapping into a dataclass and raises :class:`ConfigError`
naming the offending key (``experiments.mt10_sac.hidden_dim``) and what is allowed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, MutableMapping

import yaml


class ConfigError(ValueError):
    """A params value is missing, unknown, of the wrong type or out of range."""


def _spec(default: Any = dataclasses.MISSING, *, choices: tuple | None = None,
          ge: float | None = None, gt: float | None = None, le: float | None = None,
          doc: str = "") -> Any:
    """A dataclass field carrying its validation rule in its metadata."""
    meta = {"choices": choices, "ge": ge, "gt": gt, "le": le, "doc": doc}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


BENCHMARKS = ("mt10", "mt50")
METHODS = ("mtsac", "softmod", "care", "care_ptsl", "sac_ptsl")
PTSL_METHODS = ("care_ptsl", "sac_ptsl")
RESIDUAL_MODES = ("none", "sum", "linear", "project")
MAX_SEED = 2**31 - 1
# Experiment and table names become DVC stage names, file names and dotted params keys
# (`experiments.<name>`), so they hold no dot, slash, space or `@`.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class EnvConfig:
    """Environment protocol (reference doc section 1.1); defaults follow the reference code."""

    episode_length: int = _spec(150, ge=1, doc="steps per episode (Meta-World v3 allows up to 500)")
    goals: str = _spec("fixed", choices=("fixed", "resample"))
    reward_version: str = _spec("v1", choices=("v1", "v2"))
    normalize_reward: bool = _spec(True)
    reward_alpha: float = _spec(0.001, gt=0.0, le=1.0)
    vector: str = _spec("sync", choices=("sync", "async"))


@dataclass(frozen=True)
class SACConfig:
    """Multi-task SAC hyper-parameters (reference doc section 1.4)."""

    discount: float = _spec(0.99, gt=0.0, le=1.0)
    init_temperature: float = _spec(1.0, gt=0.0)
    actor_lr: float = _spec(3e-4, gt=0.0)
    critic_lr: float = _spec(3e-4, gt=0.0)
    alpha_lr: float = _spec(3e-4, gt=0.0)
    task_encoder_lr: float = _spec(3e-4, gt=0.0)
    tau: float = _spec(0.005, gt=0.0, le=1.0)
    encoder_tau: float = _spec(0.05, gt=0.0, le=1.0)
    batch_size: int = _spec(1280, ge=1)
    buffer_capacity: int = _spec(1_000_000, ge=1)
    init_steps: int = _spec(1500, ge=1, doc="random vector steps, then as many updates at once")
    log_std_min: float = _spec(-20.0)
    log_std_max: float = _spec(2.0)
    critic_loss_guard: float = _spec(1e8, gt=0.0)


@dataclass(frozen=True)
class TrainConfig:
    """Training-loop budget: counts are vector steps (one step of every task), as in the reference."""

    steps: int = _spec(ge=1, doc="the short reported step (paper: 200k)")
    eval_every: int = _spec(ge=1)
    checkpoint_every: int = _spec(ge=1, doc="vector steps between scratch (resume) checkpoints")
    long_steps: int | None = _spec(None, ge=1, doc="the long reported step (paper: 1M), for "
                                                   "long experiments; unset means steps")
    eval_episodes: int = _spec(1, ge=1)

    def __post_init__(self) -> None:
        if self.long_steps is None:  # a run without long seeds: one reported step
            object.__setattr__(self, "long_steps", self.steps)


@dataclass(frozen=True)
class EvaluateConfig:
    """Evaluation stage: deterministic episodes per task from the final checkpoint."""

    episodes: int = _spec(1, ge=1)
    videos: bool = _spec(False, doc="record one deterministic episode per task (GIF) and a "
                                    "contact sheet under reports/videos/; needs off-screen "
                                    "MuJoCo rendering (MUJOCO_GL=egl or osmesa)")


@dataclass(frozen=True)
class ExperimentConfig:
    """One row of a table: benchmark, method and network sizes."""

    benchmark: str = _spec(doc="mt10, mt50 or a single Meta-World v3 task such as reach-v3")
    method: str = _spec(choices=METHODS)
    hidden_dim: int = _spec(400, ge=1)
    num_layers: int = _spec(3, ge=1)
    task_onehot: bool = _spec(False, doc="MT-SAC only: append a task one-hot (garage variant)")
    num_experts: int = _spec(4, ge=1, doc="CARE encoders / Soft Modularization modules")
    pal_dim: int | None = _spec(None, ge=1, doc="PTSL rank, at most hidden_dim; unset reads the "
                                                "top-level pal_dim")
    shared_projection: bool = _spec(True, doc="PTSL: one D/U pair shared across layers")
    residual_mode: str = _spec("none", choices=RESIDUAL_MODES)
    matches: str | None = _spec(None, doc="experiment whose parameter count hidden_dim was solved "
                                          "to match (checked by the tests)")
    long: bool = _spec(False, doc="seeds in long_seeds train to train.long_steps (1M tables)")
    label: str = _spec("", doc="row label in tables and figures (default: the experiment name)")
    name: str = ""


@dataclass(frozen=True)
class RunsConfig:
    """Which experiments the pipeline trains: plain methods and PTSL methods in separate groups."""

    plain: tuple[str, ...] = _spec(())
    ptsl: tuple[str, ...] = _spec(())


@dataclass(frozen=True)
class TableConfig:
    """One table of the paper: its rows (experiments) and the step it reports.

    ``at: short`` reports ``train.steps`` over all ``seeds``; ``at: long`` reports
    ``train.long_steps`` over ``long_seeds``. Both read the same runs' evaluation curves.
    """

    title: str = _spec()
    rows: tuple[str, ...] = _spec()
    at: str = _spec("short", choices=("short", "long"))


@dataclass(frozen=True)
class ReportConfig:
    """Aggregation settings."""

    primary: str = _spec("final", choices=("final", "best"),
                         doc="final: success at the reported step; best: best so far")
    bootstrap_reps: int = _spec(2000, ge=1)


@dataclass(frozen=True)
class Params:
    """The whole of ``params.yaml``."""

    env: EnvConfig
    sac: SACConfig
    train: TrainConfig
    evaluate: EvaluateConfig
    experiments: Mapping[str, ExperimentConfig]
    runs: RunsConfig
    # Upper bound: derived seeds (seed + k) must stay inside numpy's 32-bit seed range.
    seeds: tuple[int, ...] = _spec(ge=0, le=MAX_SEED)
    long_seeds: tuple[int, ...] = _spec(ge=0, le=MAX_SEED)
    pal_dim: int = _spec(50, ge=1, doc="PTSL rank of the experiments without their own; at most "
                                       "the smallest hidden_dim among them")
    tables: Mapping[str, TableConfig] = field(default_factory=dict)
    report: ReportConfig = field(default_factory=ReportConfig)
    budget: str = "small"
    budgets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def experiment(self, name: str) -> ExperimentConfig:
        """The experiment ``name``; an unknown one is a :class:`ConfigError` listing the known."""
        if name not in self.experiments:
            raise ConfigError(f"--exp: unknown experiment {name!r}; allowed: "
                              f"{', '.join(self.experiments)}")
        return self.experiments[name]

    def table_step(self, table: TableConfig) -> int:
        """The vector step a table reports."""
        return self.train.long_steps if table.at == "long" else self.train.steps

    def table_seeds(self, table: TableConfig) -> tuple[int, ...]:
        return self.long_seeds if table.at == "long" else self.seeds


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run reads: the resolved config of one (experiment, seed) stage."""

    name: str
    seed: int
    experiment: ExperimentConfig
    env: EnvConfig
    sac: SACConfig
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for checkpoints and MLflow params)."""
        return dataclasses.asdict(self)

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
        return RunConfig(
            name=data["name"], seed=int(data["seed"]),
            experiment=build(ExperimentConfig, data["experiment"], "experiment"),
            env=build(EnvConfig, data["env"], "env"),
            sac=build(SACConfig, data["sac"], "sac"),
            train=build(TrainConfig, {k: v for k, v in data["train"].items()
                                      if k not in _RETIRED_TRAIN_KEYS}, "train"),
        )


# Keys that older saved agents carry in their config; the machine now chooses them
# (:mod:`ptsl.runtime`), so they are dropped when such an agent is loaded.
_RETIRED_TRAIN_KEYS = ("device", "torch_threads")


# --------------------------------------------------------------------------------------------
# Generic builder


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check (and gently coerce: int -> float, list -> tuple) one value against its annotation."""
    origin = typing.get_origin(tp)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    if origin is tuple:
        (item_tp, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(value, args[0], key)
    raise TypeError(f"unsupported annotation {tp!r} for {key}")  # programming error


def _check_range(value: Any, meta: Mapping[str, Any], key: str) -> None:
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(f"{key}: unknown value {value!r}; allowed: {', '.join(map(str, choices))}")
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if meta.get("gt") is not None and not v > meta["gt"]:
            raise ConfigError(f"{key}: must be > {meta['gt']}, got {v}")
        if meta.get("ge") is not None and not v >= meta["ge"]:
            raise ConfigError(f"{key}: must be >= {meta['ge']}, got {v}")
        if meta.get("le") is not None and not v <= meta["le"]:
            raise ConfigError(f"{key}: must be <= {meta['le']}, got {v}")


def build(cls: type, data: Any, prefix: str, extra: Mapping[str, Any] | None = None) -> Any:
    """Build dataclass ``cls`` from mapping ``data``; errors name ``prefix.key``.

    ``extra`` supplies fields that are not read from ``data`` (for example an experiment's name).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not (extra and f.name in extra)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}: unknown key; allowed: {', '.join(fields)}")
    kwargs: dict[str, Any] = dict(extra or {})
    for name, f in fields.items():
        key = f"{prefix}.{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key}: missing required key")
            continue
        value = _coerce(data[name], hints[name], key)
        _check_range(value, f.metadata, key)
        kwargs[name] = value
    return cls(**kwargs)


def check_benchmark(benchmark: Any, key: str) -> None:
    """``benchmark`` is mt10, mt50 or one Meta-World v3 task; else a ConfigError under ``key``."""
    if not isinstance(benchmark, str):
        raise ConfigError(f"{key}: expected a string, got {benchmark!r}")
    if benchmark in BENCHMARKS:
        return
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # imported lazily: it loads MuJoCo

    if benchmark not in ALL_V3_ENVIRONMENTS:
        raise ConfigError(f"{key}: unknown benchmark {benchmark!r}; allowed: "
                          "mt10, mt50 or a Meta-World v3 task name such as reach-v3")


def _validate_benchmark(exp: ExperimentConfig, key: str) -> None:
    check_benchmark(exp.benchmark, f"{key}.benchmark")


def _validate_method_options(exp: ExperimentConfig, key: str) -> None:
    """Options that only some methods read must not be set silently on the others."""
    if exp.task_onehot and exp.method != "mtsac":
        raise ConfigError(f"{key}.task_onehot: only method mtsac reads it; allowed for "
                          f"{exp.method}: false")
    if exp.method == "sac_ptsl" and exp.residual_mode != "none":
        # The identity-encoder variant skips its first down-projection, so the low-rank inputs
        # of consecutive layers differ in size (reference doc 5.4).
        raise ConfigError(f"{key}.residual_mode: {exp.residual_mode!r} needs a down-projection in "
                          "every layer, which sac_ptsl does not have; allowed for sac_ptsl: none")
    if exp.method not in PTSL_METHODS:
        for name, default in (("pal_dim", None), ("shared_projection", True),
                              ("residual_mode", "none")):
            if getattr(exp, name) != default:
                raise ConfigError(f"{key}.{name}: only PTSL methods ({', '.join(PTSL_METHODS)}) "
                                  f"read it; remove it from {exp.method} experiments")
    if exp.pal_dim is not None and exp.pal_dim > exp.hidden_dim:
        # The PTSL rank projects the hidden layer down; a larger rank adds parameters and no
        # expressiveness (and makes the shared projections wider than the layer they compress).
        raise ConfigError(f"{key}.pal_dim: must be <= hidden_dim ({exp.hidden_dim}), "
                          f"got {exp.pal_dim}")


def _check_name(name: Any, key: str, what: str) -> str:
    """Experiment and table names: DVC stage names, file names and dotted params keys."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{key}: {what} name {name!r} is not allowed; allowed: letters, "
                          "digits, _ and - (no dot, slash, space or @)")
    return name


def _check_unique(names: tuple[str, ...], key: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{key}: {name!r} is listed twice; each experiment once")
        seen.add(name)


def dotted_parent(root: MutableMapping[str, Any], dotted: str,
                  key: str) -> tuple[MutableMapping[str, Any], str]:
    """The mapping inside ``root`` that holds ``a.b.leaf``, and ``leaf``; a path that does not
    exist is a :class:`ConfigError` under ``key`` (presets may only set existing keys)."""
    *parents, leaf = dotted.split(".")
    node: Any = root
    for part in parents:
        node = node.get(part) if isinstance(node, Mapping) else None
    if not isinstance(node, MutableMapping) or leaf not in node:
        raise ConfigError(f"{key}.{dotted}: no such key in params.yaml")
    return node, leaf


def apply_preset(raw: Mapping[str, Any], preset: Any, key: str) -> dict[str, Any]:
    """A copy of ``raw`` with a budget preset's ``dotted.key: value`` entries applied."""
    import copy

    if not isinstance(preset, Mapping):
        raise ConfigError(f"{key}: expected a mapping of dotted.key -> value")
    out = copy.deepcopy(dict(raw))
    for dotted, value in preset.items():
        node, leaf = dotted_parent(out, str(dotted), key)
        node[leaf] = copy.deepcopy(value)
    out["budget"] = key.split(".")[-1]
    return out


def preset_matches(params: "Params") -> bool:
    """Whether the active values are exactly the named budget's preset (else: modified)."""
    preset = params.budgets.get(params.budget, {})
    for dotted, value in preset.items():
        node: Any = params
        for part in dotted.split("."):
            node = getattr(node, part)
        if (list(node) if isinstance(node, tuple) else node) != value:
            return False
    return True


def parse_params(raw: Any, check_presets: bool = True) -> Params:
    """Validate the whole params mapping (as loaded from YAML) into :class:`Params`.

    With ``check_presets`` every budget preset is applied to a copy and validated too, so a typo
    in the paper budget fails now, not hours into a run.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("params.yaml: expected a mapping at the top level")
    top = {f.name for f in dataclasses.fields(Params)}
    unknown = sorted(set(raw) - top)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key; allowed: {', '.join(sorted(top))}")
    for required in ("env", "sac", "train", "experiments", "runs", "seeds", "long_seeds"):
        if required not in raw:
            raise ConfigError(f"{required}: missing required key")
    experiments_raw = raw["experiments"]
    if not isinstance(experiments_raw, Mapping) or not experiments_raw:
        raise ConfigError("experiments: expected a non-empty mapping of experiment name -> settings")
    experiments = {}
    for name, data in experiments_raw.items():
        _check_name(name, "experiments", "experiment")
        exp = build(ExperimentConfig, data, f"experiments.{name}", extra={"name": str(name)})
        _validate_benchmark(exp, f"experiments.{name}")
        _validate_method_options(exp, f"experiments.{name}")
        experiments[str(name)] = exp
    for name, exp in experiments.items():
        if exp.matches is not None and exp.matches not in experiments:
            raise ConfigError(f"experiments.{name}.matches: unknown experiment {exp.matches!r}; "
                              f"allowed: {', '.join(experiments)}")
    runs = build(RunsConfig, raw["runs"], "runs")
    if not runs.plain and not runs.ptsl:
        raise ConfigError("runs: nothing to train; allowed: at least one experiment in "
                          "runs.plain or runs.ptsl")
    for group, names in (("plain", runs.plain), ("ptsl", runs.ptsl)):
        _check_unique(names, f"runs.{group}")
        for name in names:
            if name not in experiments:
                raise ConfigError(f"runs.{group}: unknown experiment {name!r}; allowed: "
                                  f"{', '.join(experiments)}")
            reads = reads_pal_dim(experiments[name])
            if reads != (group == "ptsl"):
                raise ConfigError(
                    f"runs.{group}: experiment {name!r} belongs in runs.{'ptsl' if reads else 'plain'}"
                    " (runs.ptsl holds exactly the PTSL experiments that read the top-level "
                    "pal_dim; one with its own pal_dim goes in runs.plain)")
    fields = {f.name: f for f in dataclasses.fields(Params)}
    seeds = _seed_list(raw, "seeds", fields)
    long_seeds = _seed_list(raw, "long_seeds", fields)
    if not set(long_seeds) <= set(seeds):
        raise ConfigError(f"long_seeds: must be a subset of seeds {list(seeds)}, got {list(long_seeds)}")
    pal_dim = _coerce(raw.get("pal_dim", 50), int, "pal_dim")
    _check_range(pal_dim, fields["pal_dim"].metadata, "pal_dim")
    readers = [e for e in experiments.values() if reads_pal_dim(e)]
    if readers:
        smallest = min(readers, key=lambda e: e.hidden_dim)
        if pal_dim > smallest.hidden_dim:
            raise ConfigError(f"pal_dim: must be <= {smallest.hidden_dim}, the hidden_dim of "
                              f"experiment {smallest.name} which reads it; got {pal_dim}")
    train = build(TrainConfig, raw["train"], "train")
    if train.long_steps < train.steps:
        raise ConfigError(f"train.long_steps: must be >= train.steps ({train.steps}), "
                          f"got {train.long_steps}")
    for key in ("steps", "long_steps"):
        if getattr(train, key) % train.eval_every:
            raise ConfigError(f"train.{key}: must be a multiple of train.eval_every "
                              f"({train.eval_every}) so that the reported step is evaluated")
    trained = set(runs.plain) | set(runs.ptsl)
    tables = _parse_tables(raw.get("tables"), experiments, trained)
    budgets = raw.get("budgets") or {}
    if not isinstance(budgets, Mapping):
        raise ConfigError("budgets: expected a mapping of budget name -> {dotted.key: value}")
    budget = raw.get("budget", "small")
    if budgets and budget not in budgets:
        raise ConfigError(f"budget: unknown budget {budget!r}; allowed: {', '.join(budgets)}")
    sac = build(SACConfig, raw["sac"], "sac")
    if sac.log_std_min >= sac.log_std_max:
        raise ConfigError(f"sac.log_std_min: must be < sac.log_std_max ({sac.log_std_max:g}), "
                          f"got {sac.log_std_min:g}")
    params = Params(
        env=build(EnvConfig, raw["env"], "env"),
        sac=sac,
        train=train,
        evaluate=build(EvaluateConfig, raw.get("evaluate"), "evaluate"),
        experiments=types.MappingProxyType(experiments),
        runs=runs,
        seeds=seeds,
        long_seeds=long_seeds,
        pal_dim=pal_dim,
        tables=types.MappingProxyType(tables),
        report=build(ReportConfig, raw.get("report"), "report"),
        budget=str(budget),
        budgets=types.MappingProxyType({str(k): dict(v) for k, v in budgets.items()}),
    )
    if check_presets:  # after the active values, so their errors are reported first
        for name, preset in budgets.items():
            try:
                parse_params(apply_preset(raw, preset, f"budgets.{name}"), check_presets=False)
            except ConfigError as exc:
                raise ConfigError(f"budgets.{name}: {exc}") from None
    return params


def reads_pal_dim(exp: ExperimentConfig) -> bool:
    """PTSL experiments without their own pal_dim read the top-level one (DVC group train_ptsl)."""
    return exp.method in PTSL_METHODS and exp.pal_dim is None


def _seed_list(raw: Mapping[str, Any], key: str, fields: Mapping[str, Any]) -> tuple[int, ...]:
    if key not in raw:
        raise ConfigError(f"{key}: missing required key")
    seeds = _coerce(raw[key], tuple[int, ...], key)
    _check_range(seeds, fields[key].metadata, key)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"{key}: expected a non-empty list of distinct integers, got {list(seeds)}")
    return seeds


def _parse_tables(raw: Any, experiments: Mapping[str, ExperimentConfig],
                  trained: set[str]) -> dict[str, TableConfig]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("tables: expected a mapping of table name -> {title, rows, at}")
    tables = {}
    for name, data in raw.items():
        key = f"tables.{name}"
        _check_name(name, "tables", "table")
        table = build(TableConfig, data, key)
        if not table.rows:
            raise ConfigError(f"{key}.rows: expected at least one experiment")
        _check_unique(table.rows, f"{key}.rows")
        for row in table.rows:
            if row not in trained:
                raise ConfigError(f"{key}.rows: {row!r} is not trained (runs.plain or runs.ptsl); "
                                  f"allowed: {', '.join(sorted(trained))}")
            if table.at == "long" and not experiments[row].long:
                raise ConfigError(f"{key}.rows: {row!r} must set long: true to be reported at "
                                  "train.long_steps")
        if len({experiments[r].benchmark for r in table.rows}) > 1:
            raise ConfigError(f"{key}.rows: all rows must share one benchmark")
        tables[str(name)] = table
    return tables


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (plain YAML
    keeps the last one silently, so a pasted experiment would hide another)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, typing.Hashable):
                continue  # the base class reports an unhashable key itself
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line from a YAML error: what is wrong and where (PyYAML's message spans lines)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content; a file that is not valid YAML (or repeats a key) is a
    :class:`ConfigError` naming the file, the line and the problem in one line."""
    path = Path(path)
    try:
        return yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({_yaml_problem(exc)})") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate a params file; a missing or malformed file is a :class:`ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    return parse_params(read_yaml(path))


def run_config(params: Params, experiment: str, seed: int) -> RunConfig:
    """Resolve the config of one training stage."""
    exp = params.experiment(experiment)
    if reads_pal_dim(exp):
        exp = dataclasses.replace(exp, pal_dim=params.pal_dim)
    train = params.train
    if exp.long and seed in params.long_seeds:
        # 200k and 1M figures come from one run's curve: long seeds simply train further.
        train = dataclasses.replace(train, steps=train.long_steps)
    return RunConfig(name=experiment, seed=seed, experiment=exp,
                     env=params.env, sac=params.sac, train=train)
