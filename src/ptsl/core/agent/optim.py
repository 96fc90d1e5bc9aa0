"""Adam exactly as ``torch.optim.Adam`` computes it, without importing torch.compile.

torch wraps an optimiser's methods for torch.compile: ``step`` imports ``torch._dynamo`` on
every call, and ``add_param_group``, ``zero_grad``, ``state_dict`` and ``load_state_dict``
import it on their first. That import costs about 1.1 s of a core, once per process: at the
first update of every training stage and every test that trains. Nothing here runs under
torch.compile (the CUDA path captures CUDA graphs, which needs no dynamo), so :class:`Adam`
calls the functions those wrappers wrap: the same code on the same tensors, hence the same
bits (tests/unit/test_optim.py steps both side by side and compares them). Step hooks and the
profiler's ``Optimizer.step`` record stay as torch sets them up.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch


def _plain(method: Any) -> Any:
    """The function under torch's wrappers (each wrapper records it as ``__wrapped__``)."""
    return inspect.unwrap(method)


_ADAM_STEP = _plain(torch.optim.Adam.step)
_ADD_PARAM_GROUP = _plain(torch.optim.Optimizer.add_param_group)
_ZERO_GRAD = _plain(torch.optim.Optimizer.zero_grad)
_STATE_DICT = _plain(torch.optim.Optimizer.state_dict)
_LOAD_STATE_DICT = _plain(torch.optim.Optimizer.load_state_dict)


class Adam(torch.optim.Adam):
    """``torch.optim.Adam`` (same arguments, state and results) whose methods skip torch's
    torch.compile wrappers, and with them the import of ``torch._dynamo``."""

    def step(self, closure: Any = None) -> Any:
        # The step wrapper's one effect outside torch.compile: gradients off unless the
        # optimiser is differentiable.
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            return _ADAM_STEP(self, closure)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _ADD_PARAM_GROUP(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _ZERO_GRAD(self, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return _STATE_DICT(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _LOAD_STATE_DICT(self, state_dict)
