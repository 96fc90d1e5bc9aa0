"""Success rates published elsewhere, kept as data with their provenance: one YAML file per source
in ``data/published/`` (the citation; the protocol it was measured under; the metric, statistic,
seeds and training length; how each value was obtained; the values per benchmark, method and
step; whether its seeds were separate runs; the width, batch and rank its runs used).
:meth:`Published.load` checks every file and refuses a missing or malformed field with one
line naming the file and the field; :meth:`Published.values_for` finds the values that stand for a
table row. docs/statistics.md says which source is comparable with which run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

from pydantic import (Field, StrictStr, TypeAdapter, ValidationError, field_validator,
                      model_validator)

from ..core.config import Count, ExperimentConfig, MethodName, Section, config_error
from ..core.errors import ConfigError, CorruptFileError
from ..ops.params import read_yaml
from .source_way import OverSeeds, statistic_text
from .stats import Kind, Metric

ROLE = "published numbers file"
#: The Meta-World version this project's runs use (its tasks are the ``-v3`` ones).
OUR_ENV_VERSION = "v3"
#: What a published value's ``match`` may constrain: an experiment's network and options.
MATCH_FIELDS = tuple(f for f in ExperimentConfig.model_fields
                     if f not in ("benchmark", "method", "long", "label", "name"))

Text = Annotated[StrictStr, Field(min_length=1)]

#: How a source's seeds were run: ``separate`` runs, ``one`` run (a launcher that resumes every
#: seed from the previous one's checkpoint, reference Q10), ``likely one`` (most likely
#: one run), ``uncertain`` (the record does not settle which).
SeedRunsKind = Literal["separate", "one", "likely one", "uncertain"]
#: The kinds a published value may be one run under: beside them a table shows the range of our
#: seeds' values with ours (:mod:`ptsl.report.comparison`).
MAYBE_ONE_RUN: tuple[SeedRunsKind, ...] = ("one", "likely one", "uncertain")
#: The settings a source states, compared with a table row's (``batch_size``: all tasks
#: together, as ``sac.batch_size`` without ``sizes_per_task``).
SETTING_KEYS = ("hidden_dim", "batch_size", "pal_dim")


class SourceProtocol(Section):
    """The protocol a source was measured under, and the preset of params.yaml's ``protocols:``
    it corresponds to (``none``: neither)."""

    preset: Literal["reference", "metaworld-plus", "none"]
    environment: Text  # e.g. "Meta-World v1 tasks at commit af8417b (12-dim observation)"
    env_version: Literal["v1", "v2", "v3"]
    reward_version: Literal["v1", "v2"]
    episode_length: Count
    goals: Literal["fixed", "resample"]
    evaluation: Text  # how success was measured (the policy, the episodes)


class Obtained(Section):
    """How the values were obtained: from a table, read off a figure (with its precision), or
    from the data a figure was drawn from."""

    how: Literal["table", "figure", "figure data"]
    where: Text  # the exact place: table number, figure file and repository path, commit
    precision: Annotated[float, Field(gt=0, lt=1)] | None = None

    @model_validator(mode="after")
    def _precision_of_a_figure(self) -> "Obtained":
        if self.how == "figure" and self.precision is None:
            raise ValueError("precision: required when values are read off a figure "
                             "(e.g. 0.02)")
        return self


class SourceStatistic(Section):
    """How a source turned its runs into one number: each run's score (``run_score``) and how
    the runs' scores combine (``over_seeds``); ``text``: the source's own words. The table puts
    ours computed the same way beside the value (:mod:`ptsl.report.source_way`)."""

    over_seeds: OverSeeds
    run_score: Kind
    text: Text  # e.g. "mean over seeds of each run's best evaluation so far"

    @property
    def short(self) -> str:
        """The statistic in this project's words."""
        return statistic_text(self.run_score, self.over_seeds)


class SeedRuns(Section):
    """Whether a source's seeds were separate runs (``kind``) and why it is read so (``why``, a
    short sentence the table notes quote)."""

    kind: SeedRunsKind
    why: Text

    @property
    def maybe_one(self) -> bool:
        """Whether the published number may be one run's."""
        return self.kind in MAYBE_ONE_RUN


class Settings(Section):
    """The sizes a source's runs used, as far as it states them: ``hidden_dim`` (the trunks'
    width), ``batch_size`` (transitions per update, all tasks together) and ``pal_dim`` (the PTSL
    rank, for PTSL methods only); a key it does not state is left out or null. A value's own
    ``settings`` replace its source's key by key (null: not stated for that value)."""

    hidden_dim: Count | None = None
    batch_size: Count | None = None
    pal_dim: Count | None = None


class PublishedValue(Section):
    """One published number: benchmark, method, the step per task it was measured at, and
    which experiments of params.yaml it stands for (``match``: experiment fields that must
    equal, e.g. ``{num_layers: 2}``; empty: every experiment of the method)."""

    benchmark: Literal["mt10", "mt50"]
    method: MethodName
    steps: Count
    value: Any
    match: dict[str, Any] = {}
    seeds: Count | None = None          # when it differs from the source's
    steps_per_task: Count | None = None  # when it differs from the source's
    runs: SeedRuns | None = None         # when it differs from the source's
    settings: Settings | None = None     # the keys that differ from the source's
    note: StrictStr = ""

    @field_validator("value")
    @classmethod
    def _rate(cls, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
            raise ValueError(f"must be a success rate in [0, 1], got {v!r}")
        return float(v)

    @field_validator("match")
    @classmethod
    def _match_fields(cls, match: dict[str, Any]) -> dict[str, Any]:
        for key, want in match.items():
            if key not in MATCH_FIELDS:
                raise ValueError(f"{key}: unknown experiment field; allowed: "
                                 f"{', '.join(MATCH_FIELDS)}")
            try:
                TypeAdapter(ExperimentConfig.model_fields[key].annotation).validate_python(
                    want, strict=True)
            except ValidationError:
                raise ValueError(f"{key}: {want!r} is not a value of experiment field {key}") \
                    from None
        return match

    def stands_for(self, experiment: ExperimentConfig) -> bool:
        """Whether this value is the published counterpart of ``experiment``."""
        return (experiment.benchmark == self.benchmark and experiment.method == self.method
                and all(getattr(experiment, k) == v for k, v in self.match.items()))


class PublishedSource(Section):
    """One source (one file of ``data/published/``)."""

    label: Text     # a short name for table notes, e.g. "PTSL paper, results figure"
    citation: Text
    protocol: SourceProtocol
    metric: Metric
    statistic: SourceStatistic
    seeds: Any  # a count, or "not stated"
    runs: SeedRuns  # whether those seeds were separate runs
    settings: Settings  # the width, batch and rank its runs used, as far as it states them
    steps_per_task: Count  # how long the runs trained
    obtained: Obtained
    values: Annotated[list[PublishedValue], Field(min_length=1)]
    notes: StrictStr = ""
    name: StrictStr = ""  # the file's stem (set by the loader, not in the file)
    file: StrictStr = ""  # the file's path as loaded (likewise)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: Any) -> int | str:
        if v != "not stated" and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"expected a number of seeds (an integer >= 1) or 'not stated', "
                             f"got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_value_per_cell(self) -> "PublishedSource":
        seen = set()
        for v in self.values:
            key = (v.benchmark, v.method, v.steps, tuple(sorted(v.match.items())))
            if key in seen:
                raise ValueError(f"values: two values for {v.benchmark} {v.method} at step "
                                 f"{v.steps} with match {v.match or '{}'}")
            seen.add(key)
        return self

    def runs_of(self, value: PublishedValue) -> SeedRuns:
        """How the seeds behind ``value`` were run."""
        return value.runs or self.runs

    def settings_of(self, value: PublishedValue) -> dict[str, int | None]:
        """The settings behind ``value``: the source's, with the value's own keys over them."""
        own = value.settings.model_dump(exclude_unset=True) if value.settings else {}
        return {**self.settings.model_dump(), **own}

    @property
    def comparable_environment(self) -> bool:
        """Whether the source ran the Meta-World version this project runs."""
        return self.protocol.env_version == OUR_ENV_VERSION


@dataclass(frozen=True)
class Published:
    """Every published source, in file-name order."""

    sources: tuple[PublishedSource, ...]

    @staticmethod
    def load(folder: Path) -> "Published":
        """Read and check every ``<source>.yaml`` of ``folder``; a malformed file is a
        :class:`CorruptFileError` naming it and the field."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: published numbers folder not found; restore it "
                                    f"with `git checkout -- {folder}`")
        sources = []
        for path in sorted(folder.iterdir()):
            if path.name.startswith("."):
                continue
            if path.suffix != ".yaml" or not path.is_file():
                raise _corrupt(path, f"not a .yaml file; a source is {folder}/<name>.yaml")
            sources.append(load_source(path))
        return Published(sources=tuple(sources))

    def values_for(self, experiment: ExperimentConfig,
                   metric: Metric) -> list[tuple[PublishedSource, PublishedValue]]:
        """The published values of ``metric`` that stand for ``experiment``, at any step."""
        return [(s, v) for s in self.sources if s.metric == metric
                for v in s.values if v.stands_for(experiment)]


def load_source(path: Path) -> PublishedSource:
    """One source file, checked."""
    try:
        raw = read_yaml(path)
    except ConfigError as exc:
        raise _corrupt(path, str(exc).removeprefix(f"{path}: ")) from None
    if not isinstance(raw, Mapping):
        raise _corrupt(path, "expected a mapping of the fields label, citation, protocol, "
                             "metric, statistic, seeds, runs, settings, steps_per_task, "
                             "obtained, values")
    for key in ("name", "file"):
        if key in raw:
            raise _corrupt(path, f"{key}: unknown key (a source is named by its file)")
    try:
        return PublishedSource.model_validate({**raw, "name": path.stem, "file": str(path)})
    except ValidationError as exc:
        raise _corrupt(path, _field_error(exc)) from None


def _field_error(exc: ValidationError) -> str:
    """pydantic's first error as ``<field path>: <what is wrong>``, list items as ``[i]``."""
    loc = exc.errors(include_url=False)[0]["loc"]
    plain = ".".join(str(p) for p in loc if not isinstance(p, int))
    indexed = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    text = str(config_error(exc, PublishedSource, ""))
    return indexed + text[len(plain):] if plain and text.startswith(plain) else text


def _corrupt(path: Path, detail: str) -> CorruptFileError:
    return CorruptFileError(path, ROLE, detail, f"restore it with `git checkout -- {path}`")


__all__ = ["MAYBE_ONE_RUN", "Metric", "OUR_ENV_VERSION", "Obtained", "Published",
           "PublishedSource", "PublishedValue", "SETTING_KEYS", "SeedRuns", "Settings",
           "SourceProtocol", "SourceStatistic", "load_source"]
