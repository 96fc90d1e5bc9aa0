"""Multi-head SAC's trunk (MT-MH-SAC): a shared MLP body, then one head per task.

This is mtrl's multi-head option (``agent.multitask.should_use_multi_head_policy=True``,
reference 2.3), read at facebookresearch/mtrl e282c3f:

* ``mtrl/agent/components/actor.py::Actor.make_model`` and
  ``mtrl/agent/components/critic.py::QFunction.build_model`` build
  ``nn.Sequential(trunk, nn.ReLU(), heads)`` with ``trunk = build_mlp(in, H, H, num_layers)``
  and ``heads = moe_layer.FeedForward(num_experts=num_envs, in_features=H, hidden_features=H,
  out_features=out, num_layers=2)``: per task ``Linear(H->H), ReLU, Linear(H->out)``
  (``num_layers`` of ``moe_layer.FeedForward`` counts Linear layers, reference 4.1);
* ``Actor.forward`` and ``Critic.forward`` run every head on every row and keep each row's own
  task's output with ``moe_layer.MaskCache`` (mask ``eye(num_envs)[task]``: the masked sum over
  heads divided by the mask's sum, which is 1);
* ``mtrl/agent/utils.py::weight_init``: the body's Linears get Xavier-uniform weights and zero
  biases, the heads ``weight_init_moe_layer`` (Xavier-uniform per task, zero bias).

The actor's trunk outputs ``2 * action_dim`` (mean and raw log-std), each Q trunk 1; Q1 and Q2
have bodies and heads of their own. With the identity encoder of mtrl's multi-head command the
networks see the observation only: the task reaches them through the heads alone.

Where this code departs from mtrl (mechanics, not maths):

* each row runs through its own task's head only (:meth:`TaskIndex.layer
  <ptsl.core.agent.nets.task_index.TaskIndex.layer>`), where mtrl runs every head on every row and
  masks: the same values up to float rounding, the same gradients (a masked-out head receives an
  exact zero from that row in mtrl too), and ``num_tasks`` times fewer head multiply-adds;
* a head's bias is stored as ``(T, out)``, mtrl's ``moe_layer.Linear`` as ``(T, 1, out)``.

The Meta-World+ baselines (rainx0r/metaworld-algorithms ``nn/multi_head.py``) build a different
network under the same name: three activated Dense layers and one Dense head per task, i.e.
``num_layers=2, head_layers=1`` here, fed the observation with a task one-hot appended, He-uniform
initialisation and heads drawn from U(+-1e-3) (actor) or U(+-3e-3) (critic). This module follows
mtrl (the rest of the project does); ``head_layers`` expresses the other head depth.
"""

from __future__ import annotations

import torch
from torch import nn

from .mlp import build_mlp, weight_init
from .task_index import TaskIndex


class TaskLinear(nn.Module):
    """One Linear layer per task: row ``b`` of task ``t`` gives ``z[b] @ weight[t] + bias[t]``.

    mtrl's ``moe_layer.Linear`` with one expert per task (weight ``T x in x out``), each row
    reading only its own task's expert. The selection is :meth:`TaskIndex.layer`, so a task's
    parameters receive gradient from that task's rows alone.
    """

    def __init__(self, num_tasks: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.num_tasks, self.in_dim, self.out_dim = num_tasks, in_dim, out_dim
        self.weight = nn.Parameter(torch.empty(num_tasks, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(num_tasks, out_dim))

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """mtrl ``weight_init_moe_layer``: Xavier-uniform weight per task, zero bias."""
        for t in range(self.num_tasks):
            nn.init.xavier_uniform_(self.weight[t], generator=generator)
        nn.init.zeros_(self.bias)

    def forward(self, z: torch.Tensor, task: TaskIndex) -> torch.Tensor:
        return task.layer(z, self.weight, self.bias)


class MultiHeadMLP(nn.Module):
    """Shared body ``build_mlp(in, H, H, num_layers)`` + ReLU, then ``head_layers`` per-task
    layers (``head_layers - 1`` of ``H -> H`` with ReLU, then ``H -> out``).

    mtrl's multi-head model has ``head_layers=2`` (the default). Called as
    ``trunk(x, task, task_encoding)``; the task encoding is not used.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int,
                 num_tasks: int, head_layers: int = 2) -> None:
        super().__init__()
        if head_layers < 1:
            raise ValueError(f"a multi-head network needs head_layers >= 1, got {head_layers}")
        self.body = build_mlp(in_dim, hidden_dim, hidden_dim, num_layers)
        dims = [hidden_dim] * head_layers + [out_dim]
        self.heads = nn.ModuleList([TaskLinear(num_tasks, d_in, d_out)
                                    for d_in, d_out in zip(dims[:-1], dims[1:])])

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """mtrl's ``weight_init``: Xavier-uniform and zero bias for the body's Linears, per task
        for the heads (:meth:`TaskLinear.reset_parameters`)."""
        weight_init(self.body, generator)
        for head in self.heads:
            head.reset_parameters(generator)

    def forward(self, x: torch.Tensor, task: TaskIndex,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        h = self.body(x)
        for head in self.heads:
            # mtrl: the ReLU after the body, and moe_layer.FeedForward's between head layers.
            h = head(torch.relu(h), task)
        return h
