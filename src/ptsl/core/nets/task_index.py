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

        The rows are grouped by task and each group is multiplied by its own task's matrix only
        (several times faster than a per-row gather, whose backward is a slow scatter-add, or
        than multiplying every row by every task's matrix). Each group is multiplied
        feature-major (``W_t^T z_t^T``, as :func:`ptsl.core.nets.mlp.feature_major`): a group
        may hold only a few rows, and a product with 5 to 11 rows would take bits that depend on
        the CPU thread count. Rows of other tasks add nothing to a task's gradient.
        """
        n, counts = self.num_tasks, self._counts
        # Contiguous operands: autograd then keeps the backward products feature-major too.
        columns = z.index_select(0, self._order).t().contiguous().split(counts, dim=1)
        weight_t, bias_t = weight.transpose(1, 2).contiguous(), bias.unsqueeze(2)
        y_t = torch.cat([torch.addmm(bias_t[t], weight_t[t], columns[t])
                         for t in range(n) if counts[t]], dim=1)
        # Back to the batch's row order; index_copy's backward is a cheap index_select.
        return y_t.new_empty(y_t.shape).index_copy(1, self._order, y_t).t()

    @cached_property
    def _order(self) -> torch.Tensor:
        """The rows sorted by task, stably (computed once per batch, shared by every layer)."""
        return torch.argsort(self.ids, stable=True)

    @cached_property
    def _counts(self) -> list[int]:
        """Rows per task, on the host: the group sizes decide the kernels."""
        return torch.bincount(self.ids, minlength=self.num_tasks).tolist()
