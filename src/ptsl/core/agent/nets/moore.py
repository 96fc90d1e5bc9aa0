"""MOORE's trunk: a Mixture Of ORthogonal Experts (Hendawy, Peters and D'Eramo, ICLR 2024).

This follows the authors' SAC networks for Meta-World, read at AhmedMagdyHendawy/MOORE a7550c5:
``moore/utils/networks_sac.py`` (``MetaworldSACMixtureMHActorNetwork``,
``MetaworldSACMixtureMHCriticNetwork``) and ``moore/utils/mixture_layers.py`` (``InputLayer``,
``ParallelLayer``, ``OrthogonalLayer1D``), configured as
``run/metaworld/run_metaworld_mt10_mhsac_mt_moore.sh`` runs them (``--orthogonal --n_experts k
--activation Linear --agg_activation Linear Tanh --actor_n_features 400 400 400
--critic_n_features 400 400 400 --shared_mu_sigma``, no ``--n_head_features``). In their order:

1. ``k`` experts, each ``Linear(in->H), ReLU, ..., Linear(H->H)``: ``num_layers`` Linear layers,
   the last one without activation (``--activation Linear``), every expert fed the same input;
2. Gram-Schmidt over the ``k`` expert outputs of each row, in expert order (classical: an output
   minus its projections on the orthonormal vectors before it, divided by its norm; no epsilon);
3. the task's ``k`` mixing weights, a bias-free ``Linear(T->k)`` of the task one-hot, i.e. one row
   of a ``(T, k)`` table; features ``sum_e w_e u_e`` with nothing applied before the mix and tanh
   after (``--agg_activation Linear Tanh``);
4. the task's output head ``Linear(H->out)``: ``2 * action_dim`` for the actor (mean and raw
   log-std, ``--shared_mu_sigma``), 1 for a Q-function (input: observation and action).

Initialisation, as the authors' code leaves it:

* experts: PyTorch's default Linear init, weights and biases U(+-1/sqrt(fan_in)). The network
  constructor writes Xavier weights, but ``ParallelLayer`` calls every layer's
  ``reset_parameters()`` before copying it into each expert, which undoes them;
* mixing table: Xavier-uniform (gain 1);
* heads: Xavier-uniform weights (gain 1), PyTorch's default bias U(+-1/sqrt(H)) (not zero).

Where this code departs from the authors' (mechanics, not maths):

* the experts are one batched ``k x in x out`` tensor per layer (:class:`ExpertLinear`, mtrl's
  layout) instead of ``k`` deep copies of an ``nn.Sequential``;
* the mixing weights are :meth:`TaskIndex.rows <ptsl.core.agent.nets.task_index.TaskIndex.rows>` of the
  ``(T, k)`` table (the transpose of the authors' ``Linear(T, k).weight``), which equals the
  one-hot product exactly; each row's head is :meth:`TaskIndex.layer`, as the authors' loop over
  the batch's tasks;
* Gram-Schmidt's projections and the mix are sums over the feature and expert axes written out in
  a fixed order, where the authors use batched matmuls: the same values to float rounding, with
  bits that do not depend on the CPU thread count;
* a Q-function returns ``(B, 1)``; the authors' critic squeezes it to ``(B,)``.

The Meta-World+ baselines (rainx0r/metaworld-algorithms ``nn/moore.py``) build the same network
with other details: 1e-8 added to every norm in Gram-Schmidt, He-uniform expert and table
weights with zero biases, heads drawn from U(+-1e-3) (actor) or U(+-3e-3) (critic), and the task
read from a one-hot appended to the observation. This module follows the authors' code.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .mlp import ExpertLinear
from .multihead import TaskLinear
from .task_index import TaskIndex


def gram_schmidt(x: torch.Tensor) -> torch.Tensor:
    """The ``(k, B, H)`` expert outputs ``x`` made orthonormal across experts, row by row.

    ``OrthogonalLayer1D``: ``u_0 = x_0 / |x_0|``; ``w_i = x_i - sum_{j<i} <x_i, u_j> u_j``
    (classical Gram-Schmidt: every coefficient is taken against ``x_i`` itself), ``u_i = w_i /
    |w_i|``. As the authors', no epsilon guards the norms.
    """
    basis: list[torch.Tensor] = []
    for v in x:
        w = v
        for u in basis:
            w = w - (v * u).sum(dim=-1, keepdim=True) * u
        basis.append(w / torch.linalg.vector_norm(w, dim=-1, keepdim=True))
    return torch.stack(basis)


class MOOREMLP(nn.Module):
    """``k`` experts of ``num_layers`` Linear layers of width ``H``, made orthonormal per row,
    mixed by the task's weights, tanh, then the task's ``Linear(H->out)`` head.

    Called as ``trunk(x, task, task_encoding)``; the task encoding is not used (MOORE encodes the
    task itself, :attr:`task_weights`).
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int,
                 num_tasks: int, num_experts: int) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"MOORE's experts need num_layers >= 1, got {num_layers}")
        if num_experts > hidden_dim:
            raise ValueError(f"MOORE cannot make {num_experts} expert outputs orthonormal in "
                             f"{hidden_dim} dimensions; use num_experts <= hidden_dim")
        dims = [in_dim] + [hidden_dim] * num_layers
        self.experts = nn.ModuleList([ExpertLinear(num_experts, d_in, d_out)
                                      for d_in, d_out in zip(dims[:-1], dims[1:])])
        #: The mixing weights of each task (the authors' bias-free ``Linear(T, k)``, transposed).
        self.task_weights = nn.Parameter(torch.empty(num_tasks, num_experts))
        self.head = TaskLinear(num_tasks, hidden_dim, out_dim)

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """The authors' initialisation (see the module docstring)."""
        for layer in self.experts:
            # nn.Linear's default: U(+-1/sqrt(fan_in)) for weight and bias; fan_in is the input
            # width, explicit here because the expert weight is stored (in, out).
            bound = 1.0 / math.sqrt(layer.in_dim)
            nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
            nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
        nn.init.xavier_uniform_(self.task_weights, generator=generator)
        for t in range(self.head.num_tasks):
            nn.init.xavier_uniform_(self.head.weight[t], generator=generator)
        bound = 1.0 / math.sqrt(self.head.in_dim)
        nn.init.uniform_(self.head.bias, -bound, bound, generator=generator)

    def expert_basis(self, x: torch.Tensor) -> torch.Tensor:
        """The ``(k, B, H)`` orthonormal expert representations of ``x`` (steps 1 and 2)."""
        h = x
        for i, layer in enumerate(self.experts):
            h = layer(torch.relu(h) if i else h)
        return gram_schmidt(h)

    def forward(self, x: torch.Tensor, task: TaskIndex,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        basis = self.expert_basis(x)
        weights = task.rows(self.task_weights)  # (B, k)
        mixed = weights[:, :1] * basis[0]
        for e in range(1, basis.shape[0]):
            mixed = mixed + weights[:, e:e + 1] * basis[e]
        return self.head(torch.tanh(mixed), task)
