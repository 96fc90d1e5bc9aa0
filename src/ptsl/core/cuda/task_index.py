"""The task selections of :class:`ptsl.core.agent.nets.task_index.TaskIndex` with static shapes: what a
GPU stream and a captured update need.

No host read, and shapes and kernels that do not depend on the batch's task mix (a captured
graph replays one fixed sequence). A per-task table is broadcast to every row and each row
gathers its task's entry: the forward is a copy; the backward writes each (row, task, column)
element once (no sort, no atomic accumulation), then sums over the rows with a plain reduction.
The values equal the CPU formulation's bit for bit; the gradients agree to float rounding
(tests/unit/test_task_index.py).
"""

from __future__ import annotations

import torch

from ..agent.nets.task_index import TaskIndex


def gather_task(per_task: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
    """Row ``b`` of the (B, T, D) ``per_task`` at task ``task[b]``: a (B, D) tensor.

    Equal bit for bit to ``per_task[arange(B), task]``, whose backward on a GPU sorts the
    indices (an accumulating ``index_put``); ``gather``'s writes each element once."""
    b, _, d = per_task.shape
    return per_task.gather(1, task.view(b, 1, 1).expand(b, 1, d)).squeeze(1)


class StaticTaskIndex(TaskIndex):
    """:class:`TaskIndex` with static shapes (see the module docstring)."""

    static = True

    def rows(self, table: torch.Tensor) -> torch.Tensor:
        b, (t, d) = self.ids.shape[0], table.shape
        return gather_task(table.unsqueeze(0).expand(b, t, d), self.ids)

    def entries(self, vector: torch.Tensor) -> torch.Tensor:
        return self.rows(vector.unsqueeze(1))

    def layer(self, z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """Every task's layer in one GEMM, then each row keeps its own task's output."""
        n, p_in, p_out = weight.shape
        y_all = (z @ weight.transpose(0, 1).reshape(p_in, n * p_out)).view(-1, n, p_out)
        return gather_task(y_all, self.ids) + self.rows(bias)
