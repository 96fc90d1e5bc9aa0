"""``params.yaml``: read, validated as a whole, and resolved into each stage's run config.

Every section is a pydantic model (:mod:`ptsl.core.config` for those of one run, the others
here); :func:`parse_params` checks what spans sections (runs and tables name known experiments,
seeds, the top-level ``pal_dim``, every budget preset) and reports the first problem as one
:class:`ConfigError` line naming the dotted key and what is allowed, before any stage touches an
output. :func:`run_config` resolves one (experiment, seed) stage through
:func:`ptsl.core.config.resolve_run`, the code a training stage's cache key holds.
"""

from __future__ import annotations

import copy
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, MutableMapping

import yaml
from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictStr, TypeAdapter,
                      ValidationError)

from ..core.config import (MAX_SEED, Count, EnvConfig, EvaluateConfig, ExperimentConfig,
                           Number, RunConfig, SACConfig, Section, Seed, TrainConfig,
                           check_top_pal_dim, config_error, resolve_run, section)
from ..core.errors import ConfigError

# Experiment and table names become DVC stage names, file names and dotted params keys
# (`experiments.<name>`), so they hold no dot, slash, space or `@`.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


class RunsConfig(Section):
    """Which experiments the pipeline trains: plain methods and PTSL methods in separate groups."""

    plain: tuple[StrictStr, ...] = ()
    ptsl: tuple[StrictStr, ...] = ()


class ContrastConfig(Section):
    """A paired contrast of a table: ``row`` minus ``minus``, seed by seed
    (:mod:`ptsl.report.contrasts`); ``primary`` marks a study's pre-registered one."""

    row: StrictStr
    minus: StrictStr
    primary: StrictBool = False


class VersusConfig(Section):
    """Another study this table's runs repeat with one setting changed
    (:mod:`ptsl.report.versus`): its name under studies/, the setting, and what it is here
    (``this``) and there (``other``)."""

    study: StrictStr
    setting: StrictStr
    this: StrictStr
    other: StrictStr


class TableConfig(Section):
    """One table of the paper: its rows (experiments) and the step it reports.

    ``at: short`` reports ``train.steps`` over all ``seeds``; ``at: long`` reports
    ``train.long_steps`` over ``long_seeds``. Both read the same runs' evaluation curves.
    ``contrasts`` lists paired differences between its rows, reported under it;
    ``equivalence`` is a margin within which the primary contrast is tested for equivalence
    (two one-sided tests). ``unpublished`` names rows no published value stands beside: a
    control of a study's own (CARE at another width), which a source's value for its method
    would otherwise match. ``versus`` sets the rows beside another study's runs of them.
    """

    title: StrictStr
    rows: tuple[StrictStr, ...]
    at: Literal["short", "long"] = "short"
    contrasts: tuple[ContrastConfig, ...] = ()
    equivalence: Annotated[Number, Field(gt=0.0, lt=1.0)] | None = None
    unpublished: tuple[StrictStr, ...] = ()
    versus: VersusConfig | None = None


class PublishedSteps(Section):
    """The paper's budget each kind of table stands for: published values measured at these
    steps per task are shown beside the ``short`` and the ``long`` tables."""

    short: Count = 200_000
    long: Count = 1_000_000


class ReportConfig(Section):
    """Aggregation settings."""

    primary: Literal["final", "best"] = Field("final", description="final: success at the "
                                                                   "reported step; best: best "
                                                                   "so far")
    metric: Literal["evaluation", "training"] = Field(
        "evaluation", description="the headline metric (first column pair, curves, heatmap, "
                                  "metrics JSON): evaluation success (deterministic policy) or "
                                  "training success (stochastic policy, the paper's figure)")
    published_steps: PublishedSteps = PublishedSteps()
    bootstrap_reps: Count = 2000
    branches: StrictBool = Field(False, description="report the task branches the "
                                                    "branches_ptsl stages recorded for every "
                                                    "run of runs.ptsl (ptsl.report.branches): "
                                                    "data/branches.csv, "
                                                    "data/branches_zeroed.csv, "
                                                    "figures/branches.png and a section of "
                                                    "results.md")


class Params(BaseModel):
    """The whole of ``params.yaml``, validated (:func:`parse_params`)."""

    model_config = ConfigDict(frozen=True)

    env: EnvConfig
    sac: SACConfig
    train: TrainConfig
    evaluate: EvaluateConfig
    experiments: dict[str, ExperimentConfig]
    runs: RunsConfig
    seeds: tuple[int, ...]
    long_seeds: tuple[int, ...]
    pal_dim: int = Field(50, description="PTSL rank of the experiments without their own; at "
                                         "most the smallest hidden_dim among them")
    tables: dict[str, TableConfig] = {}
    report: ReportConfig = ReportConfig()
    budget: str = "small"
    budgets: dict[str, dict[str, Any]] = {}
    protocol: str = Field("reference", description="the protocol preset the env and evaluation "
                                                   "keys follow (or custom)")
    protocols: dict[str, dict[str, Any]] = {}

    def experiment(self, name: str) -> ExperimentConfig:
        """The experiment ``name``; an unknown one is a :class:`ConfigError` listing the known."""
        if name not in self.experiments:
            raise ConfigError(f"--exp: unknown experiment {name!r}; allowed: "
                              f"{', '.join(self.experiments)}")
        return self.experiments[name]

    @property
    def trained(self) -> tuple[str, ...]:
        """Every experiment the pipeline trains, plain then PTSL."""
        return self.runs.plain + self.runs.ptsl

    def table_step(self, table: TableConfig) -> int:
        """The vector step a table reports."""
        return self.train.long_steps if table.at == "long" else self.train.steps

    def table_seeds(self, table: TableConfig) -> tuple[int, ...]:
        return self.long_seeds if table.at == "long" else self.seeds


def run_config(params: Params, experiment: str, seed: int) -> RunConfig:
    """The config of training stage (``experiment``, ``seed``)."""
    return resolve_run(experiment, seed, params.experiment(experiment), params.env, params.sac,
                       params.train, params.pal_dim, params.long_seeds)


def stage_group(params: Params, experiment: str) -> bool:
    """Whether ``experiment``'s stages are in the PTSL group (``train_ptsl@``...): the PTSL
    experiments that read the top-level pal_dim."""
    return params.experiment(experiment).reads_pal_dim


# --------------------------------------------------------------------------------------------
# Parsing


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


_TOP = {"seeds": TypeAdapter(tuple[Seed, ...]), "long_seeds": TypeAdapter(tuple[Seed, ...]),
        "pal_dim": TypeAdapter(Count), "budget": TypeAdapter(StrictStr),
        "protocol": TypeAdapter(StrictStr)}


def _top(raw: Mapping[str, Any], name: str) -> Any:
    """One top-level value that is not a section, type- and range-checked."""
    value = raw.get(name, Params.model_fields[name].default)
    try:
        return _TOP[name].validate_python(value)
    except ValidationError as exc:
        raise config_error(exc, Params, name) from None


def _experiment(name: str, data: Any) -> ExperimentConfig:
    key = f"experiments.{name}"
    if isinstance(data, Mapping) and "name" in data:  # set from the key, never from the file
        allowed = [f for f in ExperimentConfig.model_fields if f != "name"]
        raise ConfigError(f"{key}.name: unknown key; allowed: {', '.join(allowed)}")
    return section(ExperimentConfig, data, key).model_copy(update={"name": name})


def _seed_list(raw: Mapping[str, Any], key: str) -> tuple[int, ...]:
    if key not in raw:
        raise ConfigError(f"{key}: missing required key")
    seeds = _top(raw, key)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"{key}: expected a non-empty list of distinct integers, got {list(seeds)}")
    return seeds


def _check_top_keys(raw: Any) -> None:
    """The top level: a mapping with only known keys, every required one among them."""
    if not isinstance(raw, Mapping):
        raise ConfigError("params.yaml: expected a mapping at the top level")
    top = set(Params.model_fields)
    unknown = sorted(set(raw) - top)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key; allowed: {', '.join(sorted(top))}")
    if isinstance(raw.get("env"), Mapping) and "vector" in raw["env"]:
        raise ConfigError("env.vector: no longer a param (it changed no number): the machine "
                          "chooses how environments step; set PTSL_VECTOR=auto|sync|async")
    for required in ("env", "sac", "train", "experiments", "runs", "seeds", "long_seeds"):
        if required not in raw:
            raise ConfigError(f"{required}: missing required key")


def _parse_experiments(raw: Mapping[str, Any]) -> dict[str, ExperimentConfig]:
    """Section ``experiments``: each experiment by name, every ``matches`` naming one of them."""
    experiments_raw = raw["experiments"]
    if not isinstance(experiments_raw, Mapping) or not experiments_raw:
        raise ConfigError("experiments: expected a non-empty mapping of experiment name -> settings")
    experiments = {_check_name(name, "experiments", "experiment"): _experiment(name, data)
                   for name, data in experiments_raw.items()}
    for name, exp in experiments.items():
        if exp.matches is not None and exp.matches not in experiments:
            raise ConfigError(f"experiments.{name}.matches: unknown experiment {exp.matches!r}; "
                              f"allowed: {', '.join(experiments)}")
    return experiments


def _parse_runs(raw: Mapping[str, Any],
                experiments: Mapping[str, ExperimentConfig]) -> RunsConfig:
    """Section ``runs``: known experiments, each once, the PTSL ones that read the top-level
    pal_dim in ``runs.ptsl`` and every other in ``runs.plain``."""
    runs = section(RunsConfig, raw["runs"], "runs")
    if not runs.plain and not runs.ptsl:
        raise ConfigError("runs: nothing to train; allowed: at least one experiment in "
                          "runs.plain or runs.ptsl")
    for group, names in (("plain", runs.plain), ("ptsl", runs.ptsl)):
        _check_unique(names, f"runs.{group}")
        for name in names:
            if name not in experiments:
                raise ConfigError(f"runs.{group}: unknown experiment {name!r}; allowed: "
                                  f"{', '.join(experiments)}")
            reads = experiments[name].reads_pal_dim
            if reads != (group == "ptsl"):
                raise ConfigError(
                    f"runs.{group}: experiment {name!r} belongs in runs.{'ptsl' if reads else 'plain'}"
                    " (runs.ptsl holds exactly the PTSL experiments that read the top-level "
                    "pal_dim; one with its own pal_dim goes in runs.plain)")
    return runs


def _parse_train(raw: Mapping[str, Any], step_multiples: bool) -> TrainConfig:
    """Section ``train``: the long budget no shorter than the short one and, with
    ``step_multiples``, both evaluated."""
    train = section(TrainConfig, raw["train"], "train")
    if train.long_steps < train.steps:
        raise ConfigError(f"train.long_steps: must be >= train.steps ({train.steps}), "
                          f"got {train.long_steps}")
    interval = ("train.eval_every" if train.eval_stride == 1
                else "train.eval_every x train.eval_stride")
    for key in ("steps", "long_steps") if step_multiples else ():
        if getattr(train, key) % train.eval_interval:
            raise ConfigError(f"train.{key}: must be a multiple of {interval} "
                              f"({train.eval_interval}) so that the reported step is evaluated")
    return train


def _check_preset_keys(budgets: Mapping[str, Any], protocols: Mapping[str, Any]) -> None:
    """No key set both by a budget and by a protocol."""
    for name, preset in protocols.items():
        for dotted in preset:
            owner = next((b for b, keys in budgets.items() if dotted in keys), None)
            if owner is not None:
                raise ConfigError(f"protocols.{name}.{dotted}: budget {owner!r} sets it too; a "
                                  "key belongs to the budget or to the protocol, not both")


def _check_presets(raw: Mapping[str, Any], budgets: Mapping[str, Any],
                   protocols: Mapping[str, Any]) -> None:
    """Every budget and protocol preset applied to a copy of ``raw`` and validated."""
    for section_name, presets in (("budgets", budgets), ("protocols", protocols)):
        for name, preset in presets.items():
            key = f"{section_name}.{name}"
            # An inactive protocol is checked against the active budget for its keys, not
            # for the budget's step counts: switching to it checks those, with one line.
            try:
                parse_params(apply_preset(raw, preset, key), check_presets=False,
                             step_multiples=section_name == "budgets"
                             or name == raw.get("protocol"))
            except ConfigError as exc:
                raise ConfigError(f"{key}: {exc}") from None


def parse_params(raw: Any, check_presets: bool = True, step_multiples: bool = True) -> Params:
    """Validate the whole params mapping (as loaded from YAML) into :class:`Params`.

    With ``check_presets`` every budget and protocol preset is applied to a copy and validated
    too, so a typo in the paper budget fails now, not hours into a run. ``step_multiples``
    checks that the reported steps are evaluated (off for an inactive protocol, which says
    nothing of the budget: its switch checks that).
    """
    _check_top_keys(raw)
    experiments = _parse_experiments(raw)
    runs = _parse_runs(raw, experiments)
    seeds = _seed_list(raw, "seeds")
    long_seeds = _seed_list(raw, "long_seeds")
    if not set(long_seeds) <= set(seeds):
        raise ConfigError(f"long_seeds: must be a subset of seeds {list(seeds)}, got {list(long_seeds)}")
    pal_dim = _top(raw, "pal_dim")
    check_top_pal_dim(pal_dim, experiments.values())
    train = _parse_train(raw, step_multiples)
    tables = _parse_tables(raw.get("tables"), experiments, set(runs.plain) | set(runs.ptsl))
    budgets, budget = _presets(raw, "budgets")
    protocols, protocol = _presets(raw, "protocols")
    _check_preset_keys(budgets, protocols)
    params = Params(
        env=section(EnvConfig, raw["env"], "env"),
        sac=section(SACConfig, raw["sac"], "sac"),
        train=train,
        evaluate=section(EvaluateConfig, raw.get("evaluate"), "evaluate"),
        experiments=experiments,
        runs=runs,
        seeds=seeds,
        long_seeds=long_seeds,
        pal_dim=pal_dim,
        tables=tables,
        report=section(ReportConfig, raw.get("report"), "report"),
        budget=budget,
        budgets={str(k): dict(v) for k, v in budgets.items()},
        protocol=protocol,
        protocols={str(k): dict(v) for k, v in protocols.items()},
    )
    if protocol != CUSTOM:
        mismatch = preset_mismatch(params, "protocol")
        if mismatch:
            dotted, have, want = mismatch
            raise ConfigError(f"{dotted}: {have!r}, but protocol {protocol} sets {want!r}; "
                              f"switch with `python -m ptsl.ops.protocol {protocol}`, or set "
                              f"`protocol: {CUSTOM}` for a protocol of your own")
    if check_presets:  # after the active values, so their errors are reported first
        _check_presets(raw, budgets, protocols)
    return params


#: The protocol name that follows no preset (and is checked against none).
CUSTOM = "custom"
#: Each preset section and the top-level key that names the active preset.
ACTIVE_KEY = {"budgets": "budget", "protocols": "protocol"}


def _presets(raw: Mapping[str, Any], section_name: str) -> tuple[Mapping[str, Any], str]:
    """A preset section (``budgets``, ``protocols``) and the name of the active preset, which
    must be one of them (a protocol may also be ``custom``)."""
    active_key = ACTIVE_KEY[section_name]
    presets = raw.get(section_name) or {}
    if not isinstance(presets, Mapping):
        raise ConfigError(f"{section_name}: expected a mapping of {active_key} name -> "
                          "{dotted.key: value}")
    active = _top(raw, active_key)
    allowed = [*presets, CUSTOM] if section_name == "protocols" else list(presets)
    if presets and active not in allowed:
        raise ConfigError(f"{active_key}: unknown {active_key} {active!r}; allowed: "
                          f"{', '.join(allowed)}")
    return presets, active


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
        table = section(TableConfig, data, key)
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
        for row in table.unpublished:
            if row not in table.rows:
                raise ConfigError(f"{key}.unpublished: {row!r} is not a row of the table; "
                                  f"allowed: {', '.join(table.rows)}")
        if len({experiments[r].benchmark for r in table.rows}) > 1:
            raise ConfigError(f"{key}.rows: all rows must share one benchmark")
        for c in table.contrasts:
            for field in ("row", "minus"):
                if getattr(c, field) not in table.rows:
                    raise ConfigError(f"{key}.contrasts.{field}: {getattr(c, field)!r} is not a "
                                      f"row of the table; allowed: {', '.join(table.rows)}")
            if c.row == c.minus:
                raise ConfigError(f"{key}.contrasts: {c.row!r} minus itself; allowed: two "
                                  "different rows")
        if table.equivalence is not None and not any(c.primary for c in table.contrasts):
            raise ConfigError(f"{key}.equivalence: tests the primary contrast, and the table has "
                              "none; allowed: a table with a contrast marked primary: true")
        if table.versus is not None and not NAME_PATTERN.fullmatch(table.versus.study):
            raise ConfigError(f"{key}.versus.study: {table.versus.study!r} is not a study name; "
                              "allowed: a folder name under studies/")
        if sum(c.primary for c in table.contrasts) > 1:
            raise ConfigError(f"{key}.contrasts.primary: at most one primary contrast, got "
                              f"{sum(c.primary for c in table.contrasts)}")
        tables[str(name)] = table
    return tables


# --------------------------------------------------------------------------------------------
# Presets: budgets and protocols


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
    """A copy of ``raw`` with the ``dotted.key: value`` entries of preset ``key``
    (``budgets.paper``, ``protocols.reference``) applied and the preset named active."""
    if not isinstance(preset, Mapping):
        raise ConfigError(f"{key}: expected a mapping of dotted.key -> value")
    out = copy.deepcopy(dict(raw))
    for dotted, value in preset.items():
        node, leaf = dotted_parent(out, str(dotted), key)
        node[leaf] = copy.deepcopy(value)
    section_name, _, name = key.partition(".")
    out[ACTIVE_KEY[section_name]] = name
    return out


def preset_mismatch(params: Params, active_key: str = "budget") -> tuple[str, Any, Any] | None:
    """The first active value that differs from the named preset's (``active_key``: ``budget``
    or ``protocol``), as ``(dotted key, active value, preset value)``; None when they agree."""
    presets = params.budgets if active_key == "budget" else params.protocols
    for dotted, value in presets.get(getattr(params, active_key), {}).items():
        node: Any = params
        for part in dotted.split("."):
            node = getattr(node, part)
        if (list(node) if isinstance(node, tuple) else node) != value:
            return dotted, node, value
    return None


def preset_matches(params: Params) -> bool:
    """Whether the active values are exactly the named budget's preset (else: modified)."""
    return preset_mismatch(params, "budget") is None


# --------------------------------------------------------------------------------------------
# The file


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


__all__ = ["CUSTOM", "MAX_SEED", "Params", "PublishedSteps", "ReportConfig", "RunsConfig",
           "TableConfig", "apply_preset", "dotted_parent", "load_params", "parse_params",
           "preset_matches", "preset_mismatch", "read_yaml", "run_config", "stage_group"]
