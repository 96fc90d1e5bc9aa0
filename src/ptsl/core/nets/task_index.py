"""Each row's entry of a per-task table, in the two formulations the agent runs.

Three places select by the batch's task index: PTSL's task layer, CARE's and Soft
Modularization's task encoding, and the per-task temperature. Each module holding one has a
``static_shapes`` flag (set for the whole agent by
:meth:`ptsl.core.agent.MultiTaskSAC.set_static_shapes`):

- off (CPU): ``index_select``, whose backward (``index_add``) sums each task's rows in batch
  order, so the bits do not depend on the thread count; PTSL's task layer groups rows by task.
- on (CUDA, and the captured update): shapes and kernels that do not depend on the batch's task
  mix and no host read. The table is broadcast to every row and each row gathers its task's
  entry: the forward is a copy; the backward writes each (row, task, column) element once (no
  sort, no atomic accumulation), then sums over the rows with a plain reduction.

Both give the same values bit for bit; the gradients agree to float rounding
(tests/unit/test_task_index.py).
"""

from __future__ import annotations

import torch


def select_task_rows(table: torch.Tensor, task: torch.Tensor, static: bool) -> torch.Tensor:
    """``table[task]`` for a (T, D) ``table`` and (B,) ``task``: a (B, D) tensor."""
    if not static:
        return table.index_select(0, task)
    b, (t, d) = task.shape[0], table.shape
    return gather_task(table.unsqueeze(0).expand(b, t, d), task)


def gather_task(per_task: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
    """Row ``b`` of the (B, T, D) ``per_task`` at task ``task[b]``: a (B, D) tensor.

    Equal bit for bit to ``per_task[arange(B), task]``, whose backward on a GPU sorts the
    indices (an accumulating ``index_put``); ``gather``'s writes each element once."""
    b, _, d = per_task.shape
    return per_task.gather(1, task.view(b, 1, 1).expand(b, 1, d)).squeeze(1)
