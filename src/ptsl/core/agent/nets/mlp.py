"""The layers the methods are built from, and the reference initialisation rule: the Linear layer
(``nn.Linear``'s, which also keeps each seed's bits in a seed group), the plain MLP (mtrl
``build_mlp``, ``weight_init``), the identity encoder, and the batched expert Linear (mtrl
``moe_layer.Linear``) of Soft Modularization's modules and CARE's encoders."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch._C._functorch import (_add_batch_dim, _unwrap_batched, is_batchedtensor,
                                  maybe_get_level)

from .task_index import TaskIndex


def _physical(t: Tensor, level: int, n: int) -> Tensor:
    """``t``'s tensor under ``vmap`` at ``level`` with the seed axis first (expanded when ``t``
    is the same for every seed)."""
    if is_batchedtensor(t) and maybe_get_level(t) == level:
        value, dim = _unwrap_batched(t, level)
        return value.movedim(dim, 0)
    return t.expand(n, *t.shape)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``F.linear(x, weight, bias)``, also under a seed group's ``vmap``
    (:mod:`ptsl.core.agent.group`) with each seed's bits.

    One run calls ``F.linear`` itself: the same operations, hence the same bits, as
    ``nn.Linear``. Under ``vmap`` (weights stacked on a seed axis, a 2-D input per seed, a bias)
    torch's own rule for ``linear`` multiplies in another order than a seed's own product, so
    the product is made here on the batched tensors' values: one ``baddbmm`` for all seeds,
    whose batched kernel sums as one seed's ``addmm`` does, and one product per seed where a
    side is 1 (a Q head: matrix-vector kernels sum in another order when batched). Autograd
    records these products, and their gradients have each seed's bits too
    (tests/unit/test_group.py).
    """
    if bias is None or x.dim() != 2 or not (is_batchedtensor(weight) or is_batchedtensor(x)):
        return F.linear(x, weight, bias)
    level = max(maybe_get_level(t) for t in (x, weight, bias) if is_batchedtensor(t))
    value, dim = next(_unwrap_batched(t, level) for t in (x, weight, bias)
                      if is_batchedtensor(t) and maybe_get_level(t) == level)
    n = value.shape[dim]
    xs, ws, bs = (_physical(t, level, n) for t in (x, weight, bias))
    if 1 in (xs.shape[1], ws.shape[1], ws.shape[2]):
        y = torch.stack([F.linear(xs[s], ws[s], bs[s]) for s in range(n)])
    else:
        y = torch.baddbmm(bs.unsqueeze(1), xs, ws.transpose(1, 2))
    return _add_batch_dim(y, 0, level)


def batched_keeps_bits(shapes: Iterable[tuple[int, int]], seeds: int, rows: int) -> bool:
    """Whether, on this CPU, :func:`linear`'s batched product and its gradients give each of
    ``seeds`` seeds the bits of its own ``F.linear`` for inputs of ``rows`` rows, at every
    ``(out, in)`` weight shape of ``shapes`` (those with a side of 1 take one product per seed
    and are not checked). It holds on the AVX-512 Intel Xeons the seed groups were built on; on
    an AVX2-only AMD EPYC the weight gradient of a layer with few outputs (an actor's last, 8)
    sums in another order than one seed's. Checked on random values, on one thread as the
    update runs; the summation order depends on the shapes and the kernels, not the values."""
    g = torch.Generator().manual_seed(0)
    with torch.enable_grad():
        for out_dim, in_dim in sorted(set(shapes)):
            if 1 in (rows, out_dim, in_dim):
                continue
            x, w = (torch.randn(seeds, *shape, generator=g).requires_grad_()
                    for shape in ((rows, in_dim), (out_dim, in_dim)))
            b = torch.randn(seeds, out_dim, generator=g).requires_grad_()
            grad_y = torch.randn(seeds, rows, out_dim, generator=g)
            y = torch.vmap(linear)(x, w, b)  # the product a seed group runs, not a copy of it
            grads = torch.autograd.grad(y, (x, w, b), grad_y)
            for s in range(seeds):
                xs, ws, bs = (t[s].detach().requires_grad_() for t in (x, w, b))
                ys = F.linear(xs, ws, bs)
                own = (ys, *torch.autograd.grad(ys, (xs, ws, bs), grad_y[s]))
                if not all(torch.equal(a[s], c) for a, c in zip((y, *grads), own)):
                    return False
    return True


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, state dict and initialisation) whose product keeps each
    seed's bits in a seed group (:func:`linear`)."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


def build_mlp(in_dim: int, hidden_dim: int, out_dim: int, num_layers: int) -> nn.Sequential:
    """``num_layers`` hidden layers of ``hidden_dim`` with ReLU, then a linear output.

    As mtrl's ``build_mlp``: ``num_layers`` counts hidden layers, so there are
    ``num_layers + 1`` Linear layers; ``num_layers == 0`` is a single Linear.
    """
    if num_layers == 0:
        return nn.Sequential(Linear(in_dim, out_dim))
    # ReLUs in place: only the ReLU reads its Linear's output, so no activation is allocated twice.
    layers: list[nn.Module] = [Linear(in_dim, hidden_dim), nn.ReLU(inplace=True)]
    for _ in range(num_layers - 1):
        layers += [Linear(hidden_dim, hidden_dim), nn.ReLU(inplace=True)]
    layers.append(Linear(hidden_dim, out_dim))
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
