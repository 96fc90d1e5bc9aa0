"""The task of each row of a batch, and the selections the networks make by it.

Every per-task selection goes through a :class:`TaskIndex`: PTSL's task layers (:meth:`layer`),
the task encoding of CARE and Soft Modularization (:meth:`rows`) and the per-task temperature
(:meth:`entries`). The agent wraps a batch's task ids in one and passes it down explicitly as
the networks' ``task`` argument; no network indexes by a raw task tensor itself.

These are the CPU formulations, chosen so that a run's bits do not depend on the thread count
(an accumulating index-put sums each task's rows in a thread-dependent order at the paper's
batch). A CUDA run uses the same selections with static shapes
(:class:`ptsl.core.cuda.task_index.StaticTaskIndex`): the same values.
"""

from __future__ import annotations

from functools import cached_property

import torch


class TaskIndex:
    """The (B,) int64 task ids of a batch (:attr:`ids`) among ``num_tasks`` tasks, and the
    selections by them."""

    #: Whether every selection has static shapes and makes no host read (the device path's
    #: :class:`~ptsl.core.cuda.task_index.StaticTaskIndex`).
    static = False

    def __init__(self, ids: torch.Tensor, num_tasks: int) -> None:
        self.ids = ids
        self.num_tasks = num_tasks

    def rows(self, table: torch.Tensor) -> torch.Tensor:
        """``table[ids]`` for a (T, D) table: a (B, D) tensor. ``index_select``'s backward
        (``index_add``) sums each task's rows in batch order."""
        return table.index_select(0, self.ids)

    def entries(self, vector: torch.Tensor) -> torch.Tensor:
        """The (T,) ``vector``'s entry of each row, as (B, 1)."""
        return vector[self.ids].unsqueeze(-1)  # one column: summed in batch order on CPU

    def layer(self, z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``z[b] @ weight[ids[b]] + bias[ids[b]]`` for every row ``b``: a per-task Linear with
        ``weight`` (T, P_in, P_out) and ``bias`` (T, P_out).

        The rows go to a (T, m, P_in) block, task ``t``'s rows (in batch order) at the top of
        slice ``t`` and zeros below, ``m`` the largest task's row count; one batched product
        multiplies every slice by its own task's matrix and each row reads its result back.
        Every task's rows meet only their own matrix, as in a loop over tasks, in a handful of
        operations instead of several per task (such a loop is most of a PTSL update's time at
        small sizes). The bits do not depend on the thread count (the batched product splits its
        slices among the threads, not a slice's sums; tests/unit/test_task_index.py checks 1, 2
        and 4 threads), the copies in and out touch each row once (no accumulation), and the
        zero rows add exact zeros to the weight's gradient.
        """
        n, m = self.num_tasks, self._group_rows
        block = z.new_zeros(n * m, z.shape[1]).index_copy(0, self._slots, z).view(n, m, -1)
        y = torch.baddbmm(bias.unsqueeze(1), block, weight)
        return y.view(n * m, -1).index_select(0, self._slots)

    @cached_property
    def _group_rows(self) -> int:
        """The largest task's row count (``m``), on the host: it sizes the block."""
        return max(self._counts)

    @cached_property
    def _slots(self) -> torch.Tensor:
        """Row ``b``'s place in the (T * m) block: ``ids[b] * m`` plus its rank among its
        task's rows in batch order (computed once per batch, shared by every layer)."""
        order, ids = self._order, self.ids
        counts = torch.as_tensor(self._counts, dtype=ids.dtype, device=ids.device)
        first = torch.cumsum(counts, 0) - counts  # where each task's rows start in ``order``
        sorted_ids = ids.index_select(0, order)
        rank = torch.arange(ids.shape[0], device=ids.device) - first.index_select(0, sorted_ids)
        return torch.empty_like(ids).index_copy(0, order, sorted_ids * self._group_rows + rank)

    @cached_property
    def _order(self) -> torch.Tensor:
        """The rows sorted by task, stably."""
        return torch.argsort(self.ids, stable=True)

    @cached_property
    def _counts(self) -> list[int]:
        """Rows per task, on the host."""
        return torch.bincount(self.ids, minlength=self.num_tasks).tolist()
