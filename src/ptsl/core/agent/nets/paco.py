"""PaCo's trunk: parameter-compositional multi-task RL (Sun et al., NeurIPS 2022).

This follows the network the Meta-World+ baselines build, read at rainx0r/metaworld-algorithms
30c9991 ``metaworld_algorithms/nn/paco.py`` (``PaCoNetwork``, ``CompositionalDense``) and the
same file of the parameter-scaling paper's code (rainx0r/mtrl f5c121f ``mtrl/nn/paco.py``),
whose runs give the published numbers:

1. the task's ``K`` composition weights ``w = onehot @ W_tau + b_tau``: a ``Dense(K)`` with bias
   on the task one-hot, i.e. one row of a ``(T, K)`` table plus a bias shared by every task;
2. every layer, the output head included, holds ``K`` parameter sets ``(W_k, b_k)`` of one
   ``Dense`` each; the layer's output is ``sum_k w_k (x W_k + b_k)``; ReLU after every hidden
   layer, nothing after the head (``2 * action_dim`` for the actor, 1 for a Q-function);
3. ``num_layers`` hidden layers of width ``H`` (``depth`` 3, ``width`` 400 in their config).

``K`` is ``num_parameter_sets``: 5 in their ``PaCoConfig`` default, which the published MT10 run
(``experiments/baselines/mt10_paco.py``) keeps, and 20 in the published MT50 run
(``mt50_paco.py``). That version has no loss mask-out and no parameter reset (the PaCo paper's
two stabilisers). The authors' actor counts, 1.7001M on MT10 and 6.80118M on MT50 (the
parameter-scaling figure's data), are this network's at 400x3 with K 5 and 20.

Initialisation, as theirs: He-uniform weights (``U(+-sqrt(6 / fan_in))``, each parameter set
drawn on its own) and zero biases in the hidden layers and the task table; the head's weights
and biases ``U(+-1e-3)`` in the actor and ``U(+-3e-3)`` in a Q-function (``head_scale``).

Where this code departs from theirs (mechanics, not maths):

* each parameter set is multiplied as a Linear layer is here (``F.linear``, the weight stored
  ``out x in``), one set after another, and the ``K`` outputs are mixed by a sum over the sets
  written out in set order, where theirs vmaps one ``Dense`` over the sets and mixes with an
  ``einsum``: the same values to float rounding, with bits that do not depend on the CPU thread
  count (a batched product over the sets took thread-dependent bits in the heads' backward);
* the task reaches the network as the batch's task index, and its composition weights are
  :meth:`TaskIndex.rows <ptsl.core.agent.nets.task_index.TaskIndex.rows>` of the ``(T, K)`` table
  plus the bias, where theirs multiplies a one-hot appended to the observation (and strips it
  before the first layer): the same values exactly;
* a Q-function reads ``(observation, action)``; theirs concatenates ``(action, observation)``
  (the order of the first layer's input rows, nothing else);
* a Q-function returns ``(B, 1)`` like every trunk here.

Composing each task's parameters first (the paper's ``theta_tau = Phi w_tau``) would save
multiply-adds at a training batch, but a product over the ``K`` sets takes bits that depend on
the thread count, and the composition costs more than the layer at an acting batch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .task_index import TaskIndex

#: Meta-World+'s head initialisation bounds (``uniform(1e-3)`` actor, ``uniform(3e-3)`` critic).
ACTOR_HEAD_SCALE = 1e-3
CRITIC_HEAD_SCALE = 3e-3


class CompositionalLinear(nn.Module):
    """``K`` parameter sets of one Linear layer (their ``CompositionalDense``): weight
    ``K x out x in`` (each set laid out as ``nn.Linear``'s), bias ``K x out``."""

    def __init__(self, num_sets: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.weight = nn.Parameter(torch.empty(num_sets, out_dim, in_dim))
        self.bias = nn.Parameter(torch.empty(num_sets, out_dim))

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``sum_k weights[:, k] * (x W_k + b_k)`` for the ``(B, K)`` composition weights."""
        # unbind: one slice per set, whose backward stacks the slices' gradients once.
        sets = zip(self.weight.unbind(0), self.bias.unbind(0))
        out = None
        for k, (w, b) in enumerate(sets):
            term = weights[:, k:k + 1] * F.linear(x, w, b)
            out = term if out is None else out + term
        return out


class PaCoMLP(nn.Module):
    """``num_layers`` compositional layers of width ``H`` with ReLU, then a compositional head;
    every layer's output is the mix of its ``K`` parameter sets' outputs by the task's weights.

    Called as ``trunk(x, task, task_encoding)``; the task encoding is not used (PaCo encodes the
    task itself, :attr:`task_weights`).
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int,
                 num_tasks: int, num_parameter_sets: int, head_scale: float) -> None:
        super().__init__()
        if num_parameter_sets < 1:
            raise ValueError(f"PaCo needs num_parameter_sets >= 1, got {num_parameter_sets}")
        dims = [in_dim] + [hidden_dim] * num_layers + [out_dim]
        #: Each layer's ``K`` parameter sets (their ``CompositionalDense``).
        self.layers = nn.ModuleList([CompositionalLinear(num_parameter_sets, d_in, d_out)
                                     for d_in, d_out in zip(dims[:-1], dims[1:])])
        #: The composition weights of each task (their ``Dense(K)`` kernel on the one-hot) and
        #: that Dense's bias, which every task shares.
        self.task_weights = nn.Parameter(torch.empty(num_tasks, num_parameter_sets))
        self.task_bias = nn.Parameter(torch.empty(num_parameter_sets))
        self.head_scale = head_scale

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """Meta-World+'s initialisation (see the module docstring)."""
        *hidden, head = self.layers
        for layer in hidden:
            bound = math.sqrt(6.0 / layer.in_dim)  # He-uniform, fan_in = the set's input width
            nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
            nn.init.zeros_(layer.bias)
        bound = math.sqrt(6.0 / self.task_weights.shape[0])  # fan_in = the one-hot's width
        nn.init.uniform_(self.task_weights, -bound, bound, generator=generator)
        nn.init.zeros_(self.task_bias)
        nn.init.uniform_(head.weight, -self.head_scale, self.head_scale, generator=generator)
        nn.init.uniform_(head.bias, -self.head_scale, self.head_scale, generator=generator)

    def forward(self, x: torch.Tensor, task: TaskIndex,
                task_encoding: torch.Tensor | None = None) -> torch.Tensor:
        weights = task.rows(self.task_weights) + self.task_bias  # (B, K)
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(torch.relu(h) if i else h, weights)
        return h
