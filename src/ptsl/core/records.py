"""The records a run leaves, each with one writer and one reader that checks what it reads.

- :class:`Curve`: ``data/runs/<run>/curve.csv``, one row per evaluation (training stage);
- :class:`Summary`: ``data/runs/<run>/summary.json``, the run's final numbers (training stage);
- :class:`Evaluation`: ``data/eval/<run>.json``, deterministic episodes of the final agent
  (evaluate stage);
- :class:`VideoIndex`: ``data/videos/<run>/index.json``, the rollout GIFs recorded or why none
  were (evaluate stage);
- :class:`Metrics`: ``reports/metrics/<experiment>.json``, a table row's headline numbers
  (aggregate stage; what ``dvc metrics show`` prints).

Every byte a writer produces is a function of the config and the seed, so DVC hashes reproduce.
A reader turns a missing file into a ``FileNotFoundError`` and anything truncated, malformed or
belonging to another run into a :class:`~ptsl.core.errors.CorruptFileError` naming the file.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import pandas as pd
from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr,
                      ValidationError, field_validator)

from .config import config_error
from .errors import CorruptFileError
from .files import json_text, write_atomic

#: What to do about an output that cannot be read.
REBUILD = "run `dvc repro` to rebuild it"
#: Column prefix of a task's success in a curve (``success/reach-v3``).
TASK_PREFIX = "success/"
#: Column prefix of a task's training success in a curve (``train_success/reach-v3``).
TRAIN_PREFIX = "train_success/"


def run_id(experiment: str, seed: int) -> str:
    """``mt10_mtsac-1``: the name of a run's records, DVC stages and MLflow runs alike."""
    return f"{experiment}-{seed}"


def _read_text(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run `dvc repro` to produce it")
    return path.read_bytes()


def read_json(path: Path, role: str) -> Any:
    """A JSON file's content; invalid JSON is a :class:`CorruptFileError` naming ``role``."""
    try:
        return json.loads(_read_text(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptFileError(path, role, f"not valid JSON: {exc}", REBUILD) from None


def csv_bytes_frame(path: Path, data: bytes, role: str) -> pd.DataFrame:
    """The CSV table in ``data`` (read from ``path``): a file that does not end in a newline
    (written whole, newline last) or does not parse is a :class:`CorruptFileError` naming
    ``role``."""
    if not data.endswith(b"\n"):
        raise CorruptFileError(path, role, "truncated: no newline at its end", REBUILD)
    try:
        return pd.read_csv(io.BytesIO(data))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CorruptFileError(path, role, f"not a CSV table: {' '.join(str(exc).split())}",
                               REBUILD) from None


class Record(BaseModel):
    """A JSON record: its fields in file order, read back checked."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    ROLE: ClassVar[str] = "record"

    def write(self, path: str | Path) -> None:
        write_atomic(path, json_text(self.model_dump(by_alias=True, exclude_none=True)),
                     self.ROLE)

    @classmethod
    def read(cls, path: str | Path) -> Any:
        path = Path(path)
        data = read_json(path, cls.ROLE)
        if not isinstance(data, dict):
            raise CorruptFileError(path, cls.ROLE, "expected a JSON object", REBUILD)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise CorruptFileError(path, cls.ROLE, str(config_error(exc, cls, "")),
                                   REBUILD) from None

    @classmethod
    def read_of(cls, path: str | Path, experiment: str, seed: int) -> Any:
        """:meth:`read` of a record that names its run, refusing another run's."""
        record = cls.read(path)
        if (record.experiment, record.seed) != (experiment, seed):
            raise CorruptFileError(path, cls.ROLE, f"it is the {cls.ROLE.split()[-1]} of "
                                   f"{record.experiment!r} seed {record.seed!r}, not "
                                   f"{experiment!r} seed {seed}", REBUILD)
        return record




def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    return value


class Summary(Record):
    """``summary.json``: where the run ended, its final success and size."""

    ROLE: ClassVar[str] = "run summary"
    final_step: StrictInt
    final_success: float
    parameter_count: StrictInt = Field(ge=1)
    experiment: StrictStr
    seed: StrictInt
    method: StrictStr
    benchmark: StrictStr

    @classmethod
    def read_run(cls, path: str | Path, experiment: str, seed: int,
                 final_step: int) -> "Summary":
        """The summary of run (``experiment``, ``seed``), which must end at ``final_step``."""
        summary = cls.read_of(path, experiment, seed)
        if summary.final_step != final_step:
            raise CorruptFileError(path, cls.ROLE, f"final_step is {summary.final_step!r}, but "
                                   f"the run trains to step {final_step}", REBUILD)
        return summary


class Evaluation(Record):
    """``data/eval/<run>.json``: deterministic episodes of every task with the final agent."""

    ROLE: ClassVar[str] = "evaluation record"
    experiment: StrictStr
    seed: StrictInt
    method: StrictStr
    benchmark: StrictStr
    episodes: StrictInt = Field(ge=1)
    success: float
    returns: float = Field(alias="return")
    parameter_count: StrictInt = Field(ge=1)
    per_task: dict[str, float]

    _finite_success = field_validator("success", "returns")(_finite)


class TaskVideo(BaseModel):
    """One task's rollout in a video index."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    success: StrictBool
    frames: StrictInt = Field(ge=1)


class VideoIndex(Record):
    """``index.json`` of a run's video folder: the recorded tasks, or why nothing was recorded."""

    ROLE: ClassVar[str] = "video index"
    NAME: ClassVar[str] = "index.json"
    videos: StrictBool
    reason: StrictStr | None = None
    size: StrictInt | None = None
    every: StrictInt | None = None
    tasks: dict[str, TaskVideo] | None = None

    @classmethod
    def read_folder(cls, folder: Path) -> "VideoIndex":
        """The index of ``folder``, checked against the files it lists."""
        path = folder / cls.NAME
        index = cls.read(path)
        if index.videos:
            if index.tasks is None:
                raise CorruptFileError(path, cls.ROLE, "tasks: expected task -> {success, "
                                       "frames}", REBUILD)
            for task in index.tasks:
                for ext in ("gif", "png"):
                    if not (folder / f"{task}.{ext}").is_file():
                        raise CorruptFileError(path, cls.ROLE, f"it lists {task}.{ext}, which "
                                               "is missing", REBUILD)
        return index


class Metrics(Record):
    """``reports/metrics/<experiment>.json``: a table row's headline at the short and the long
    reported step (the primary metric's mean over seeds)."""

    ROLE: ClassVar[str] = "metrics record"
    short: float | None = None
    long: float | None = None


class Curve:
    """``curve.csv``: one row per evaluation. Its columns, in this order:

    - ``step``, ``env_steps``, ``success``, ``return`` and ``success/<task>`` for every task:
      the deterministic evaluation at ``step`` (evaluation success, any step of an episode);
    - ``train_episodes``: training episodes per task finished since the previous row (0 at
      step 0);
    - ``train_success`` and ``train_success/<task>`` for the same tasks in the same order: the
      training success of those episodes (each task's rate of episodes with success at any
      step under the stochastic policy; the mean over tasks), a windowed rate that is empty
      exactly where ``train_episodes`` is 0.
    """

    ROLE = "training curve"
    COLUMNS = ("step", "env_steps", "success", "return")

    @staticmethod
    def row(step: int, env_steps: int, success: float, returns: float,
            per_task: Mapping[str, float], train_episodes: int,
            train_per_task: Mapping[str, float] | None) -> dict[str, float]:
        """One evaluation's row, with the training success of the ``train_episodes`` training
        episodes per task finished since the previous row (``train_per_task``: each task's
        rate; None, written empty, when no episode finished)."""
        row: dict[str, float] = {"step": step, "env_steps": env_steps, "success": success,
                                 "return": returns}
        row.update({f"{TASK_PREFIX}{name}": float(s) for name, s in per_task.items()})
        rates = train_per_task or {name: math.nan for name in per_task}
        row["train_episodes"] = train_episodes
        row["train_success"] = math.fsum(rates.values()) / len(rates)
        row.update({f"{TRAIN_PREFIX}{name}": float(rates[name]) for name in per_task})
        return row

    @staticmethod
    def frame(rows: Sequence[Mapping[str, float]]) -> pd.DataFrame:
        """The curve of ``rows`` as a table (``TrainResult.curve``)."""
        return pd.DataFrame(list(rows))

    @classmethod
    def write(cls, path: str | Path, curve: pd.DataFrame) -> None:
        write_atomic(path, curve.to_csv(index=False), cls.ROLE)

    @classmethod
    def read(cls, path: str | Path, final_step: int, steps: Sequence[int] = ()) -> pd.DataFrame:
        """The curve, checked: the columns of a curve, no gap in any evaluation value, steps
        rising to ``final_step`` (where the run stops) and each of ``steps`` (the steps the
        tables report) evaluated; the training-success columns for the same tasks, numeric, in
        [0, 1] and empty exactly where ``train_episodes`` is 0."""
        path, role = Path(path), cls.ROLE
        curve = csv_bytes_frame(path, _read_text(path), role)
        tasks = [c for c in curve.columns if str(c).startswith(TASK_PREFIX)]
        missing = [c for c in ("step", "success", "return") if c not in curve.columns]
        if missing or not tasks:
            what = f"columns {missing}" if missing else f"{TASK_PREFIX}<task> columns"
            raise CorruptFileError(path, role, f"no {what}", REBUILD)
        train = cls._train_columns(path, curve, tasks)
        evaluation = curve.drop(columns=train[1:])  # training success is empty in some rows
        if curve.empty or evaluation.isna().any().any():
            raise CorruptFileError(path, role, "empty or with missing values (truncated?)",
                                   REBUILD)
        numeric = curve[["step", "success", "return", *tasks, *train]]
        if not all(pd.api.types.is_numeric_dtype(numeric[c]) for c in numeric.columns):
            raise CorruptFileError(path, role, "non-numeric values", REBUILD)
        step = curve["step"]
        if not (step == step.round()).all() or not step.is_monotonic_increasing \
                or step.duplicated().any():
            raise CorruptFileError(path, role, "steps are not whole numbers rising row by row",
                                   REBUILD)
        success = curve[["success", *tasks]]
        if ((success < 0) | (success > 1)).any().any():
            raise CorruptFileError(path, role, "success values outside [0, 1]", REBUILD)
        cls._check_train_values(path, curve, train)
        last = int(step.iloc[-1])
        if last != final_step:
            raise CorruptFileError(path, role, f"ends at step {last}, but params.yaml trains "
                                   f"this run to step {final_step}", REBUILD)
        absent = sorted(set(steps) - set(step.astype(int)))
        if absent:
            raise CorruptFileError(path, role, f"no evaluation at step(s) {absent} that the "
                                   "tables report", REBUILD)
        curve["step"] = step.astype(int)
        curve["train_episodes"] = curve["train_episodes"].astype(int)
        return curve

    @classmethod
    def _train_columns(cls, path: Path, curve: pd.DataFrame, tasks: list[str]) -> list[str]:
        """``train_episodes``, ``train_success`` and the per-task columns, which must name the
        tasks of the ``success/`` columns in their order."""
        absent = [c for c in ("train_episodes", "train_success") if c not in curve.columns]
        if absent:
            raise CorruptFileError(path, cls.ROLE, f"no columns {absent} (training success; a "
                                   "curve from before it was recorded)", REBUILD)
        names = [str(c)[len(TASK_PREFIX):] for c in tasks]
        train_tasks = [c for c in curve.columns if str(c).startswith(TRAIN_PREFIX)]
        if [str(c)[len(TRAIN_PREFIX):] for c in train_tasks] != names:
            raise CorruptFileError(path, cls.ROLE, f"its {TRAIN_PREFIX}<task> columns do not "
                                   f"name the tasks of its {TASK_PREFIX}<task> columns in their "
                                   "order", REBUILD)
        return ["train_episodes", "train_success", *train_tasks]

    @classmethod
    def _check_train_values(cls, path: Path, curve: pd.DataFrame, train: list[str]) -> None:
        """Whole episode counts, 0 at step 0; rates in [0, 1], empty exactly where no episode
        finished."""
        episodes, rates = curve[train[0]], curve[train[1:]]
        if episodes.isna().any() or not (episodes == episodes.round()).all() \
                or (episodes < 0).any() or (episodes[curve["step"] == 0] != 0).any():
            raise CorruptFileError(path, cls.ROLE, "train_episodes must be whole numbers >= 0, "
                                   "0 at step 0", REBUILD)
        if ((rates < 0) | (rates > 1)).any().any():
            raise CorruptFileError(path, cls.ROLE, "training success values outside [0, 1]",
                                   REBUILD)
        empty = rates.isna()
        none = (episodes == 0).to_numpy()[:, None]
        if (empty.to_numpy() != none).any():
            bad = int(curve["step"][(empty.to_numpy() != none).any(axis=1)].iloc[0])
            raise CorruptFileError(path, cls.ROLE, f"training success at step {bad} must be "
                                   "empty exactly where train_episodes is 0", REBUILD)
