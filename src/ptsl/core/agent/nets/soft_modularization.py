"""Soft Modularization as mtrl implements it (reference 3;
mtrl ``soft_modularization.py`` and ``moe_layer.Linear``).

Pieces: the feed-forward state encoder, the routing network, the soft-modularized trunk of
:class:`~ptsl.core.agent.nets.mlp.ExpertLinear` modules, and the critic's obs-action projection in
front of it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .mlp import ExpertLinear, build_mlp
from .task_index import TaskIndex

#: Width of the state encoder output (mtrl ``feedforward`` encoder: hidden 50, feature 50).
ENCODER_DIM = 50


class FeedForwardEncoder(nn.Module):
    """State encoder ``build_mlp(obs, 50, 50, 2)``: Linear, ReLU, Linear, ReLU, Linear."""

    def __init__(self, obs_dim: int, feature_dim: int = ENCODER_DIM,
                 hidden_dim: int = ENCODER_DIM, num_layers: int = 2) -> None:
        super().__init__()
        self.trunk = build_mlp(obs_dim, hidden_dim, feature_dim, num_layers)
        self.feature_dim = feature_dim

    def forward(self, obs: torch.Tensor, task: TaskIndex | None = None,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        return self.trunk(obs)


class RoutingNetwork(nn.Module):
    """Routing probabilities of a soft-modularized trunk (mtrl ``RoutingNetwork``).

    ``h = Linear(in->H)(x * task_encoding)``; step 0 logits ``W_d[0](relu(h))``; step k > 0
    logits ``W_d[k](relu(W_u[k-1](logits_{k-1}) * h))`` (as the reference, ``W_u`` reads the
    previous step's *logits* and multiplies the pre-ReLU ``h``). Each step's ``E*E`` logits are
    reshaped to ``(E, E)`` and softmaxed over the last axis: ``p[i, j]`` is the weight of source
    module ``j`` in the input of module ``i`` of the next layer.
    """

    def __init__(self, in_dim: int, hidden_dim: int, num_experts: int, num_steps: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.projection = nn.Linear(in_dim, hidden_dim)
        self.w_d = nn.ModuleList([nn.Linear(hidden_dim, num_experts ** 2)
                                  for _ in range(num_steps)])
        self.w_u = nn.ModuleList([nn.Linear(num_experts ** 2, hidden_dim)
                                  for _ in range(num_steps - 1)])

    def forward(self, x: torch.Tensor, task_encoding: torch.Tensor) -> torch.Tensor:
        """Probabilities of shape ``(num_steps, B, E, E)``, each row a distribution."""
        if x.shape != task_encoding.shape:
            raise ValueError(f"routing needs trunk input and task encoding of the same shape, got "
                             f"{tuple(x.shape)} and {tuple(task_encoding.shape)}")
        h = self.projection(x * task_encoding)
        logits = [self.w_d[0](F.relu(h))]
        for w_u, w_d in zip(self.w_u, self.w_d[1:]):
            logits.append(w_d(F.relu(w_u(logits[-1]) * h)))
        e = self.num_experts
        return torch.stack([torch.softmax(lg.reshape(-1, e, e), dim=-1) for lg in logits])


class SoftModularizedMLP(nn.Module):
    """Soft-modularized trunk (mtrl ``SoftModularizedMLP``).

    ``num_layers`` layers of ``num_experts`` parallel modules: hidden layers
    ExpertLinear + ReLU, last layer ExpertLinear without activation. Between layers the
    module outputs are mixed by the routing probabilities; the output is the mean over the
    last layer's modules. Routing reads ``trunk input * task_encoding``, so the trunk input
    width must equal the task-encoding width (50).

    Reference Q7 kept by the builders: mtrl hard-codes ``num_layers=2`` for the actor and
    critic trunks whatever ``agent.actor.num_layers`` says.
    """

    def __init__(self, num_experts: int, in_dim: int, out_dim: int, hidden_dim: int,
                 num_layers: int = 2) -> None:
        super().__init__()
        if num_layers < 2:
            raise ValueError(f"a soft-modularized MLP needs at least 2 layers, got {num_layers}")
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        self.layers = nn.ModuleList([ExpertLinear(num_experts, d_in, d_out)
                                     for d_in, d_out in zip(dims[:-1], dims[1:])])
        self.routing = RoutingNetwork(in_dim, hidden_dim, num_experts, num_layers - 1)

    def routing_weights(self, x: torch.Tensor, task_encoding: torch.Tensor) -> torch.Tensor:
        """The ``(num_layers - 1, B, E, E)`` routing probabilities for input ``x``."""
        return self.routing(x, task_encoding)

    def forward(self, x: torch.Tensor, task: TaskIndex | None = None,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        if task_encoding is None:
            raise ValueError("SoftModularizedMLP routes on the task encoding; got None")
        probs = self.routing(x, task_encoding)
        h = x
        for step, layer in enumerate(self.layers[:-1]):
            h = F.relu(layer(h))  # (E, B, H): output of every module
            # Input of module i in the next layer = sum_j p[b, i, j] * out_j.
            h = torch.einsum("bij,jbd->ibd", probs[step], h)
        return self.layers[-1](h).mean(dim=0)


class ObsActionProjection(nn.Module):
    """Critic Q-function of a task-conditioned model (mtrl ``QFunction`` with
    ``should_condition_model_on_task_info``): ``Linear(feat + action -> feat)`` then ``trunk``."""

    def __init__(self, in_dim: int, out_dim: int, trunk: nn.Module) -> None:
        super().__init__()
        self.projection = nn.Linear(in_dim, out_dim)
        self.trunk = trunk

    def forward(self, x: torch.Tensor, task: TaskIndex | None = None,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        return self.trunk(self.projection(x), task, task_encoding)
