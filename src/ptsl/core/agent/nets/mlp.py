"""The layers the methods are built from, and the reference initialisation rule: the plain MLP
(mtrl ``build_mlp``, ``weight_init``), the identity encoder, and the batched expert Linear (mtrl
``moe_layer.Linear``) of Soft Modularization's modules and CARE's encoders."""

from __future__ import annotations

import torch
from torch import nn

from .task_index import TaskIndex


def build_mlp(in_dim: int, hidden_dim: int, out_dim: int, num_layers: int) -> nn.Sequential:
    """``num_layers`` hidden layers of ``hidden_dim`` with ReLU, then a linear output.

    As mtrl's ``build_mlp``: ``num_layers`` counts hidden layers, so there are
    ``num_layers + 1`` Linear layers; ``num_layers == 0`` is a single Linear.
    """
    if num_layers == 0:
        return nn.Sequential(nn.Linear(in_dim, out_dim))
    # ReLUs in place: only the ReLU reads its Linear's output, so no activation is allocated twice.
    layers: list[nn.Module] = [nn.Linear(in_dim, hidden_dim), nn.ReLU(inplace=True)]
    for _ in range(num_layers - 1):
        layers += [nn.Linear(hidden_dim, hidden_dim), nn.ReLU(inplace=True)]
    layers.append(nn.Linear(hidden_dim, out_dim))
    return nn.Sequential(*layers)


def weight_init(module: nn.Module, generator: torch.Generator | None = None) -> None:
    """Reference init (PTSL ``mtrl/agent/utils.py``): Linear with bias -> Xavier-uniform weight,
    zero bias; Linear without bias -> all-zero weight (PTSL's projections start at zero)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            if m.bias is not None:
                nn.init.xavier_uniform_(m.weight, generator=generator)
                nn.init.zeros_(m.bias)
            else:
                nn.init.zeros_(m.weight)


def feature_major(mlp: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``mlp(x)`` for an ``x`` of few rows (one per task), computed on ``x``'s transpose.

    Every matrix product then has a feature count as its row count, never the number of rows of
    ``x``. That matters on the CPU: for products of 5 to 11 rows MKL splits the inner sum
    across threads, so their bits depend on the thread count (a run trained with 1 thread would
    differ from one trained with 2). Products with feature-many rows, forward and backward, do
    not. The values are ``mlp(x)``'s up to rounding. ``mlp`` holds Linear layers with a bias and
    element-wise activations.
    """
    h = x.t().contiguous()  # contiguous: autograd then keeps the backward products feature-major
    for layer in mlp:
        if isinstance(layer, nn.Linear):
            h = torch.addmm(layer.bias.unsqueeze(1), layer.weight, h)
        else:
            h = layer(h)
    return h.t()


class MLPTrunk(nn.Module):
    """Task-agnostic MLP trunk (MT-SAC, CARE)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int) -> None:
        super().__init__()
        self.net = build_mlp(in_dim, hidden_dim, out_dim, num_layers)

    def forward(self, x: torch.Tensor, task: TaskIndex | None = None,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        return self.net(x)


class IdentityEncoder(nn.Module):
    """The raw observation, optionally followed by a task one-hot (garage's MT-SAC variant)."""

    def __init__(self, obs_dim: int, num_tasks: int, onehot: bool = False) -> None:
        super().__init__()
        self.num_tasks = num_tasks
        self.onehot = onehot
        self.feature_dim = obs_dim + (num_tasks if onehot else 0)

    def forward(self, obs: torch.Tensor, task: TaskIndex,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        if not self.onehot:
            return obs
        onehot = nn.functional.one_hot(task.ids, self.num_tasks).to(obs.dtype)
        return torch.cat([obs, onehot], dim=-1)


class ExpertLinear(nn.Module):
    """``num_experts`` parallel Linear layers in one tensor (mtrl ``moe_layer.Linear``).

    Weight ``E x in x out``, bias ``E x 1 x out``. Input ``(B, in)`` is broadcast to every
    expert; input ``(E, B, in)`` feeds expert ``e`` with slice ``e``. Output ``(E, B, out)``.
    """

    def __init__(self, num_experts: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.weight = nn.Parameter(torch.empty(num_experts, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(num_experts, 1, out_dim))

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """mtrl ``weight_init_moe_layer``: Xavier-uniform per expert, zero bias."""
        for e in range(self.num_experts):
            nn.init.xavier_uniform_(self.weight[e], generator=generator)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.matmul(self.weight) + self.bias


def init_expert_layers(module: nn.Module, generator: torch.Generator | None) -> None:
    """Apply the expert init to every :class:`ExpertLinear` inside ``module``
    (``ptsl.core.agent.nets.mlp.weight_init`` only knows ``nn.Linear``)."""
    for m in module.modules():
        if isinstance(m, ExpertLinear):
            m.reset_parameters(generator)
