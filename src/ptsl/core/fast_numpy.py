"""numpy as Meta-World's task code sees it in a fast class (:mod:`ptsl.core.fast_env`): numpy
itself, but for ``np.linalg.norm`` of a float vector, which Meta-World's rewards call a few
times a step, taken straight to the two operations numpy does for it.

``np.linalg.norm(x)`` of a 1-D float64 array, with ``ord`` None or 2 and no axis, is
``sqrt(x.ravel(order='K').dot(...))`` after about three microseconds of argument checks
(numpy/linalg/_linalg.py); :func:`norm` does those two operations for that case and calls
numpy's own function for every other. Everything else of :data:`NUMPY` is numpy's own object
(the same ``np.random`` state, the same types).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm(x, ord, axis, keepdims)``."""
    if (type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 1 and axis is None
            and not keepdims and (ord is None or ord == 2)):
        x = x.ravel(order="K")
        return np.sqrt(x.dot(x))
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _module(name: str, source: types.ModuleType, **replaced: Any) -> types.ModuleType:
    """A module holding ``source``'s names (its lazy ones through its own ``__getattr__``),
    with ``replaced`` in their place."""
    out = types.ModuleType(name)
    out.__dict__.update(vars(source))
    out.__dict__.update(replaced)
    return out


#: numpy with :func:`norm` as ``linalg.norm``.
NUMPY = _module("numpy", np, linalg=_module("numpy.linalg", np.linalg, norm=norm))
