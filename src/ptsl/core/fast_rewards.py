"""Meta-World's ``reward_utils.tolerance`` for one number, to the same bits, without the
arrays it builds around it (``np.logical_and``, two ``np.where``, ``np.isscalar``, ``.item()``:
about ten microseconds a call, a handful of calls a step).

For a float ``x`` (Python or numpy) with plain-number bounds and margin and the two sigmoids
Meta-World uses (``long_tail``, ``gaussian``), :func:`tolerance` computes the distance outside
the bounds in IEEE doubles as numpy does, then the sigmoid with the same numpy scalar
operations as ``reward_utils._sigmoids``; any other input (an array, another sigmoid, a bad
bound, which raises there) goes to Meta-World's own function. :data:`REWARD_UTILS` is
Meta-World's ``reward_utils`` with this ``tolerance``.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from metaworld.utils import reward_utils

_FLOATS = (float, np.float64)
_NUMBERS = (int, float, np.float64)


def _long_tail(d: np.float64, value_at_1: float) -> np.float64:
    scale = np.sqrt(1 / value_at_1 - 1)
    return 1 / ((d * scale) ** 2 + 1)


def _gaussian(d: np.float64, value_at_1: float) -> np.float64:
    scale = np.sqrt(-2 * np.log(value_at_1))
    return np.exp(-0.5 * (d * scale) ** 2)


_SIGMOIDS = {"long_tail": _long_tail, "gaussian": _gaussian}


def tolerance(x: Any, bounds: tuple[Any, Any] = (0.0, 0.0), margin: Any = 0.0,
              sigmoid: str = "gaussian", value_at_margin: float = 0.1) -> Any:
    """``reward_utils.tolerance(x, bounds, margin, sigmoid, value_at_margin)``."""
    lower, upper = bounds
    if not (type(x) in _FLOATS and type(lower) in _NUMBERS and type(upper) in _NUMBERS
            and type(margin) in _NUMBERS and type(value_at_margin) in _FLOATS
            and sigmoid in _SIGMOIDS and lower <= upper and margin >= 0
            and 0 < value_at_margin < 1):
        return reward_utils.tolerance(x, bounds=bounds, margin=margin, sigmoid=sigmoid,
                                      value_at_margin=value_at_margin)
    if lower <= x <= upper:
        return 1.0
    if margin == 0:
        return 0.0
    # np.where(x < lower, lower - x, x - upper) / margin, one branch, in doubles
    d = np.float64(((lower - x) if x < lower else (x - upper)) / margin)
    return float(_SIGMOIDS[sigmoid](d, value_at_margin))


#: Meta-World's reward_utils module with :func:`tolerance` in place of its own.
REWARD_UTILS = types.SimpleNamespace(**{**vars(reward_utils), "tolerance": tolerance})
