"""CARE's mixture-of-encoders (reference 4.1; mtrl ``MixtureofExpertsEncoder`` with
``AttentionBasedExperts``).

``num_experts`` state encoders, each Linear(obs->50) -> ReLU -> Linear(50->50), are all
evaluated; a softmax gate computed from the task encoding by ``build_mlp(50, 50, E, 2)`` mixes
them into a weighted average.
"""

from __future__ import annotations

import torch
from torch import nn

from .mlp import ExpertLinear, build_mlp
from .task_index import TaskIndex

#: Expert output / hidden width and attention MLP sizes of the README CARE command.
CARE_FEATURE_DIM = 50
CARE_HIDDEN_DIM = 50


class ExpertEncoders(nn.Module):
    """Parallel expert encoders (mtrl ``moe_layer.FeedForward`` with ``num_layers=2``, which there
    counts Linear layers): ExpertLinear(obs->hidden), ReLU, ExpertLinear(hidden->feature).
    No output activation. Output ``(E, B, feature)``."""

    def __init__(self, num_experts: int, obs_dim: int, feature_dim: int = CARE_FEATURE_DIM,
                 hidden_dim: int = CARE_HIDDEN_DIM) -> None:
        super().__init__()
        self.hidden = ExpertLinear(num_experts, obs_dim, hidden_dim)
        self.out = ExpertLinear(num_experts, hidden_dim, feature_dim)
        self.num_experts = num_experts
        self.feature_dim = feature_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(obs)))


class AttentionGate(nn.Module):
    """Soft attention over experts from the task encoding: ``softmax(mlp(enc) / temperature)``.

    Reference Q8 (second half): the reference's ``should_detach_task_encoding`` key is
    misspelt in its config, so the gate input is *not* detached; neither is it here. In the
    critic this lets the critic loss train the task encoder through the gate too.
    """

    def __init__(self, task_dim: int, num_experts: int, hidden_dim: int = CARE_HIDDEN_DIM,
                 num_layers: int = 2, temperature: float = 1.0) -> None:
        super().__init__()
        self.mlp = build_mlp(task_dim, hidden_dim, num_experts, num_layers)
        self.temperature = temperature

    def forward(self, task_encoding: torch.Tensor) -> torch.Tensor:
        """Gate ``(B, E)``; each row sums to 1."""
        return torch.softmax(self.mlp(task_encoding) / self.temperature, dim=-1)


class CAREEncoder(nn.Module):
    """Mixture-of-encoders: ``sum_k g_k expert_k(obs) / sum_k g_k`` with gate ``g`` from the
    task encoding. Called as ``encoder(obs, task, task_encoding)``; output ``(B, 50)``.

    Pass ``experts`` to tie this encoder's experts to another encoder's (the actor's experts
    are the critic's Parameter objects, reference ``copy_conv_weights_from``). The gate is never
    shared: reference Q8, the actor's attention MLP is untied and, since the actor
    optimiser holds only the actor trunk, stays at its initial values for the whole run.

    The reference detaches only the expert outputs when ``detach=True`` (the gate keeps its
    graph); :class:`ptsl.core.agent.sac.Actor`/``Critic`` detach the whole output instead. Nothing that an
    optimiser steps differs: in those calls the task encoding is already detached, the actor's
    gate is in no optimiser, and the critic gate's stray gradient from the actor loss is cleared
    by the critic optimiser's ``zero_grad`` before the next critic step.
    """

    def __init__(self, obs_dim: int, num_experts: int, task_dim: int,
                 experts: ExpertEncoders | None = None) -> None:
        super().__init__()
        if experts is not None and experts.num_experts != num_experts:
            raise ValueError(f"tied experts have {experts.num_experts} experts, "
                             f"expected {num_experts}")
        self.experts = experts if experts is not None else ExpertEncoders(num_experts, obs_dim)
        self.gate = AttentionGate(task_dim, num_experts)
        self.feature_dim = self.experts.feature_dim

    def forward(self, obs: torch.Tensor, task: TaskIndex | None,
                task_encoding: torch.Tensor | None) -> torch.Tensor:
        if task_encoding is None:
            raise ValueError("CAREEncoder needs the task encoding to weight its experts; got None")
        mask = self.gate(task_encoding).t().unsqueeze(-1)  # (E, B, 1)
        encoding = self.experts(obs)  # (E, B, F)
        # As the reference: masked sum over experts over the mask sum (= 1 for soft attention).
        return (encoding * mask).sum(dim=0) / mask.sum(dim=0)
