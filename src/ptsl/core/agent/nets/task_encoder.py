"""Task encoders (reference 4.2) and the pretrained task-description embeddings (reference 7).

Two variants, both ending in the same trunk ``build_mlp(50, 50, 50, 2)``:

* learned (Soft Modularization): ``nn.Embedding(N, 50)`` -> ReLU -> trunk;
* pretrained (CARE): frozen 768-dim table -> ReLU -> Linear(768->100) -> ReLU ->
  Linear(100->50) -> ReLU -> trunk.

The encoder maps a batch of int64 task indices to a (B, 50) encoding.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ...benchmarks import EMBEDDING_DIM
from ...errors import CorruptFileError
from .mlp import build_mlp, feature_major, weight_init
from .task_index import TaskIndex

#: Width of the task encoding (mtrl ``task_encoder_cfg.model_cfg.output_dim`` and embedding_dim).
TASK_ENCODING_DIM = 50
#: Repository root, found from the package location (src/ptsl/core/agent/nets/ -> repo).
_REPO_ROOT = Path(__file__).resolve().parents[5]
#: Default embeddings file: the MT50 file covers every MT10/MT50 task (same vectors for MT10).
DEFAULT_EMBEDDINGS = _REPO_ROOT / "data" / "task_embeddings" / "metaworld-mt50.json"
#: State-dict key of the frozen table inside :class:`TaskEncoder` (to rebuild from a checkpoint).
PRETRAINED_TABLE_KEY = "embedding.table"

_VERSION_SUFFIX = re.compile(r"-v\d+$")


def _base_name(task: str) -> str:
    """``reach-v3`` -> ``reach`` (the file uses v1 names, current Meta-World v3)."""
    return _VERSION_SUFFIX.sub("", task)


def load_task_embeddings(task_names: Sequence[str], path: str | Path | None = None) -> np.ndarray:
    """The (N, 768) float32 table of ``task_names``, in that order, from an mtrl embeddings file.

    Names are matched without their ``-vN`` suffix, so ``reach-v3`` finds ``reach-v1``.
    Raises FileNotFoundError for a missing file and :class:`ptsl.core.errors.CorruptFileError` (naming the
    file and the task) for a malformed file or a task it does not cover.
    """
    file = Path(path) if path is not None else DEFAULT_EMBEDDINGS
    if not file.is_file():
        raise FileNotFoundError(f"task embeddings file not found: {file}; restore it with "
                                f"`git checkout -- {file}`")

    def corrupt(detail: str) -> CorruptFileError:
        return CorruptFileError(file, "task embeddings file", detail,
                                f"restore it with `git checkout -- {file}`")

    try:
        raw = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise corrupt(f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict) or not raw:
        raise corrupt("expected a JSON object mapping task names to vectors")
    by_base = {_base_name(k): v for k, v in raw.items()}
    rows: list[list[float]] = []
    for name in task_names:
        vec = by_base.get(_base_name(name))
        if vec is None:
            raise corrupt(f"no embedding for task {name!r}, looked up as {_base_name(name)}-vN")
        if (not isinstance(vec, list) or len(vec) != EMBEDDING_DIM
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           and math.isfinite(v) for v in vec)):
            raise corrupt(f"embedding of task {name!r} is not a list of {EMBEDDING_DIM} "
                          "finite numbers")
        rows.append(vec)
    if not rows:
        raise ValueError("load_task_embeddings: no task names given")
    return np.asarray(rows, dtype=np.float32)


class LearnedTaskEmbedding(nn.Module):
    """``nn.Embedding(N, dim)`` -> ReLU (Soft Modularization's task embedding)."""

    def __init__(self, num_tasks: int, dim: int = TASK_ENCODING_DIM) -> None:
        super().__init__()
        self.table = nn.Embedding(num_tasks, dim)
        self.num_tasks = num_tasks
        self.out_dim = dim

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        # mtrl's weight_init only touches Linear layers, so the table keeps torch's N(0, 1) init.
        nn.init.normal_(self.table.weight, generator=generator)

    def forward(self, task: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.table(task))


class PretrainedTaskEmbedding(nn.Module):
    """Frozen table -> ReLU -> Linear(768->2*dim) -> ReLU -> Linear(2*dim->dim) -> ReLU (CARE).

    The table is a persistent buffer (frozen, as ``nn.Embedding.from_pretrained(freeze=True)``
    in the reference), so it is saved in and restored from the state dict but never optimised.
    No normalisation of the raw vectors, as in the reference.
    """

    def __init__(self, table: torch.Tensor, dim: int = TASK_ENCODING_DIM) -> None:
        super().__init__()
        if table.ndim != 2:
            raise ValueError("pretrained task table must be 2-D (N, D), got shape "
                             f"{tuple(table.shape)}")
        self.table: torch.Tensor
        self.register_buffer("table", table.detach().to(torch.float32).clone())
        self.projection = nn.Sequential(nn.Linear(table.shape[1], 2 * dim), nn.ReLU(),
                                        nn.Linear(2 * dim, dim), nn.ReLU())
        self.num_tasks = int(table.shape[0])
        self.out_dim = dim

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        weight_init(self.projection, generator)

    def forward(self, task: torch.Tensor) -> torch.Tensor:
        # One row per task (TaskEncoder encodes every task once): few rows, so feature-major.
        return feature_major(self.projection, torch.relu(self.table[task]))


class TaskEncoder(nn.Module):
    """Task index -> task encoding: an embedding block, then ``build_mlp(dim, dim, dim, 2)``."""

    def __init__(self, embedding: LearnedTaskEmbedding | PretrainedTaskEmbedding,
                 dim: int = TASK_ENCODING_DIM) -> None:
        super().__init__()
        self.embedding = embedding
        self.trunk = build_mlp(embedding.out_dim, dim, dim, 2)
        self.out_dim = dim

    @classmethod
    def learned(cls, num_tasks: int, generator: torch.Generator | None,
                dim: int = TASK_ENCODING_DIM) -> TaskEncoder:
        """Learned embedding table (Soft Modularization), initialised from ``generator``."""
        enc = cls(LearnedTaskEmbedding(num_tasks, dim), dim)
        enc.reset_parameters(generator)
        return enc

    @classmethod
    def pretrained(cls, table: torch.Tensor | np.ndarray, generator: torch.Generator | None,
                   dim: int = TASK_ENCODING_DIM) -> TaskEncoder:
        """Frozen pretrained table (CARE), initialised from ``generator``."""
        enc = cls(PretrainedTaskEmbedding(torch.as_tensor(table), dim), dim)
        enc.reset_parameters(generator)
        return enc

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """Reference init: Xavier-uniform Linear weights, zero biases, N(0, 1) learned table."""
        self.embedding.reset_parameters(generator)
        weight_init(self.trunk, generator)

    def forward(self, task: TaskIndex) -> torch.Tensor:
        # The encoding depends on the task index alone, so encode each of the N tasks once and
        # give every row its task's encoding: the same values and gradients as encoding all B
        # rows (B = 1280 >> N), without B x 768 x 100 multiply-adds per update. Not [task]: its
        # backward (an accumulating index_put) sums each task's rows in an order that varies
        # run to run on several CPU threads at the paper's batch, and sorts on a GPU.
        every_task = torch.arange(self.embedding.num_tasks, device=task.ids.device)
        return task.rows(feature_major(self.trunk, self.embedding(every_task)))
