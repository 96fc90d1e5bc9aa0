"""PTSL's projected task-specific layers (reference 5; PTSL ``pal_layer.py`` and
``moe_layer.FeedForwardPAL``).

One PAL layer computes ``act(S x + b  +  U((D x) W_t + c_t))`` with a shared Linear ``S``, shared
bias-free down/up projections ``D``/``U`` (never per task) and a low-rank task layer
``W_t`` (P_in x P_out), ``c_t`` (P_out) for the task ``t`` of each row.

Departure from the reference's mechanics (not its maths): the reference stores the batch's task
indices in every layer through a ``set_indices`` side channel before each forward; here the
batch's :class:`~ptsl.core.agent.nets.task_index.TaskIndex` is an argument of ``forward``, so a
mixed-task batch needs no state. Each row's task layer is :meth:`TaskIndex.layer` (one batched
product over the rows grouped by task) instead of the reference's gather and batched matmul: the same values and gradients,
faster. The residual mixing is the reference's.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from ...methods import RESIDUAL_MODES
from .task_index import TaskIndex


def keep_down_projection(in_dim: int, pal_dim: int, num_tasks: int) -> bool:
    """Reference rule: an own down-projection is kept iff it needs no more parameters than
    letting the task layers read the ``in_dim`` input directly."""
    with_projection = in_dim * pal_dim + num_tasks * (pal_dim + 1) * pal_dim
    return with_projection <= num_tasks * (in_dim + 1) * pal_dim


def keep_up_projection(out_dim: int, p_in: int, pal_dim: int, num_tasks: int) -> bool:
    """Reference rule: an own up-projection is kept iff it needs no more parameters than
    letting the task layers write the ``out_dim`` output directly (``p_in``: task-layer input)."""
    return out_dim * pal_dim + num_tasks * (p_in + 1) * pal_dim <= num_tasks * (p_in + 1) * out_dim


class PALOutput(NamedTuple):
    """Layer output ``y``, the raw projection ``z_raw = D x`` and the low-rank output
    ``y_low = z W_t + c_t`` (before ``U``); the last two feed the next layer's residual."""

    y: torch.Tensor
    z_raw: torch.Tensor
    y_low: torch.Tensor


class ResidualMix(nn.Module):
    """How a layer's low-rank input mixes in the previous layer's (reference 5.4).

    ``sum``: ``Dx + z_prev + y_prev``; ``linear``: ``a0 Dx + a1 z_prev + a2 y_prev`` with one
    learnable ``a`` (init 1/3 each) per network; ``project``: ``R [Dx; z_prev; y_prev]`` with
    one bias-free ``R`` (3P -> P, zero-initialised) per network.
    """

    def __init__(self, mode: str, pal_dim: int) -> None:
        super().__init__()
        if mode not in ("sum", "linear", "project"):
            raise ValueError(f"unknown residual mode {mode!r}; allowed: sum, linear, project")
        self.mode = mode
        self.alpha: nn.Parameter | None = None
        self.project: nn.Linear | None = None
        if mode == "linear":
            self.alpha = nn.Parameter(torch.full((3,), 1.0 / 3.0))
        elif mode == "project":
            self.project = nn.Linear(3 * pal_dim, pal_dim, bias=False)

    def forward(self, z: torch.Tensor, prev_raw: torch.Tensor,
                prev_low: torch.Tensor) -> torch.Tensor:
        if self.mode == "sum":
            return z + prev_raw + prev_low
        if self.alpha is not None:
            return self.alpha[0] * z + self.alpha[1] * prev_raw + self.alpha[2] * prev_low
        assert self.project is not None
        return self.project(torch.cat([z, prev_raw, prev_low], dim=-1))


class PALLayer(nn.Module):
    """One PAL layer ``in_dim -> out_dim`` with rank ``pal_dim`` for ``num_tasks`` tasks.

    ``down``/``up``: projections supplied by the network (shared across layers, always used);
    when ``None`` the layer makes its own only if :func:`keep_down_projection` /
    :func:`keep_up_projection` says so, otherwise the task layer works directly on the input
    (``P_in = in_dim``) or output (``P_out = out_dim``).
    """

    def __init__(self, in_dim: int, out_dim: int, pal_dim: int, num_tasks: int,
                 down: nn.Linear | None = None, up: nn.Linear | None = None,
                 activation: bool = True) -> None:
        super().__init__()
        if down is None and keep_down_projection(in_dim, pal_dim, num_tasks):
            down = nn.Linear(in_dim, pal_dim, bias=False)
        if down is not None and (down.in_features, down.out_features) != (in_dim, pal_dim):
            raise ValueError(f"down-projection must map {in_dim} -> {pal_dim}, got "
                             f"{down.in_features} -> {down.out_features}")
        self.p_in = pal_dim if down is not None else in_dim
        if up is None and keep_up_projection(out_dim, self.p_in, pal_dim, num_tasks):
            up = nn.Linear(pal_dim, out_dim, bias=False)
        if up is not None and (up.in_features, up.out_features) != (pal_dim, out_dim):
            raise ValueError(f"up-projection must map {pal_dim} -> {out_dim}, got "
                             f"{up.in_features} -> {up.out_features}")
        self.p_out = pal_dim if up is not None else out_dim
        self.shared = nn.Linear(in_dim, out_dim)
        self.down = down
        self.up = up
        self.task_weight = nn.Parameter(torch.empty(num_tasks, self.p_in, self.p_out))
        self.task_bias = nn.Parameter(torch.empty(num_tasks, self.p_out))
        self.activation = activation
        self.num_tasks = num_tasks

    def reset_task_parameters(self, generator: torch.Generator | None) -> None:
        """Reference init of the task layers (untouched by ``weight_init`` there):
        ``W_t`` standard normal (``torch.randn``), ``c_t`` zero."""
        nn.init.normal_(self.task_weight, generator=generator)
        nn.init.zeros_(self.task_bias)

    def forward(self, x: torch.Tensor, task: TaskIndex, mix: ResidualMix | None = None,
                prev: tuple[torch.Tensor, torch.Tensor] | None = None) -> PALOutput:
        if self.down is not None:
            # S x + b and D x in one GEMM over the stacked weights [S; D] (bias 0 for D's rows):
            # the thin P-column product on its own runs at a fraction of the GEMM rate, and its
            # backward merges into the shared layer's.
            out_dim = self.shared.out_features
            stacked = torch.addmm(torch.cat([self.shared.bias, self._zero_bias()]), x,
                                  torch.cat([self.shared.weight, self.down.weight]).t())
            shared, z_raw = stacked.split([out_dim, stacked.shape[1] - out_dim], dim=1)
        else:
            shared, z_raw = self.shared(x), x
        z = mix(z_raw, *prev) if (mix is not None and prev is not None) else z_raw
        y_low = task.layer(z, self.task_weight, self.task_bias)
        y = torch.addmm(shared, y_low, self.up.weight.t()) if self.up is not None else shared + y_low
        return PALOutput(torch.relu(y) if self.activation else y, z_raw, y_low)

    def _zero_bias(self) -> torch.Tensor:
        return self.shared.bias.new_zeros(self.down.out_features)


class FeedForwardPAL(nn.Module):
    """PAL replacement of ``build_mlp(in, hidden, out, num_layers)``: ``num_layers + 1`` PAL layers.

    * layer 0 (in -> H): own automatic down-projection; up = the shared ``U`` if
      ``shared_projection`` else automatic; no residual input.
    * layers 1..L-1 (H -> H): ``D``/``U`` shared across layers if ``shared_projection``, else
      each layer's own automatic ones.
    * layer L (H -> out): down = shared ``D`` (or automatic), up automatic (skipped for small
      outputs), no activation.

    ``shared_projection`` only ever means *shared across layers*: projections are never per
    task. Called as ``trunk(x, task, task_encoding)``; the task encoding is not used.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int,
                 pal_dim: int, num_tasks: int, shared_projection: bool = True,
                 residual_mode: str = "none") -> None:
        super().__init__()
        if residual_mode not in RESIDUAL_MODES:
            raise ValueError(f"unknown residual mode {residual_mode!r}; allowed: "
                             f"{', '.join(RESIDUAL_MODES)}")
        if num_layers < 1:
            raise ValueError(f"FeedForwardPAL needs num_layers >= 1, got {num_layers}")
        self.pal_dim = pal_dim
        self.shared_projection = shared_projection
        self.residual_mode = residual_mode
        down = nn.Linear(hidden_dim, pal_dim, bias=False) if shared_projection else None
        up = nn.Linear(pal_dim, hidden_dim, bias=False) if shared_projection else None
        self.down = down
        self.up = up
        self.mix = ResidualMix(residual_mode, pal_dim) if residual_mode != "none" else None
        layers = [PALLayer(in_dim, hidden_dim, pal_dim, num_tasks, down=None, up=up)]
        layers += [PALLayer(hidden_dim, hidden_dim, pal_dim, num_tasks, down=down, up=up)
                   for _ in range(num_layers - 1)]
        layers.append(PALLayer(hidden_dim, out_dim, pal_dim, num_tasks, down=down, up=None,
                               activation=False))
        self.layers = nn.ModuleList(layers)
        if self.mix is not None:
            self._check_residual_dims(in_dim)

    def _check_residual_dims(self, in_dim: int) -> None:
        # The residual sums P-dim vectors of consecutive layers, so every layer must project
        # down and every non-final layer must keep its task output in P (reference 5.4).
        p = self.pal_dim
        for i, layer in enumerate(self.layers):
            final = i == len(self.layers) - 1
            if layer.p_in != p or (not final and layer.p_out != p):
                what = f"input width {in_dim}" if i == 0 else "these sizes"
                raise ValueError(
                    f"residual_mode={self.residual_mode!r} needs every PAL layer to work in the "
                    f"{p}-dim space, but layer {i} maps {layer.p_in} -> {layer.p_out} (with "
                    f"{what} the automatic rule skips a projection); use residual_mode='none'")

    def forward(self, x: torch.Tensor, task: TaskIndex,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        prev: tuple[torch.Tensor, torch.Tensor] | None = None
        for i, layer in enumerate(self.layers):
            out = layer(x, task, self.mix if i > 0 else None, prev)
            x, prev = out.y, (out.z_raw, out.y_low)
        return x


def init_pal_layers(module: nn.Module, generator: torch.Generator | None) -> None:
    """Initialise the task layers of every :class:`PALLayer` in ``module`` (the shared Linears
    and the zero projections come from ``ptsl.core.agent.nets.mlp.weight_init``)."""
    for m in module.modules():
        if isinstance(m, PALLayer):
            m.reset_task_parameters(generator)
