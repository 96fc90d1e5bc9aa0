"""scipy's rotation-matrix-to-quaternion conversion for one matrix, to the same bits, without
scipy's per-call overhead (about 40 us a call in the cython backend alone, most of it array
set-up for a 3x3 input).

Meta-World puts the quaternion of an object's rotation matrix into the observation through
``Rotation.from_matrix(m).as_quat()``. scipy (1.17) checks the determinant and the Gramian
``m @ m.T`` against the identity (``atol`` 1e-12, ``rtol`` 1e-5), orthogonalises by SVD where
that check fails, then converts with Markley's method and normalises. MuJoCo's ``xmat`` comes
from a unit quaternion, so the check always passes with room to spare; this module does the
same arithmetic as scipy's C code in the same order (Python floats are IEEE doubles, and
``math.sqrt`` rounds correctly as C's ``sqrt`` does) where the matrix passes the check with a
margin that no rounding difference can cross, and calls scipy itself for any other matrix.
``tests/unit/test_rotation.py`` compares it with scipy bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

#: Half of scipy's tolerances: a Gramian entry computed here differs from numpy's by a few ulps
#: of 1 (about 1e-15), far inside the other half, so every matrix taken here passes scipy's
#: check too (and skips its SVD).
_OFF_DIAGONAL = 0.5e-12
_DIAGONAL = 0.5 * (1e-12 + 1e-5)


def _from_scipy(matrix: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(matrix).as_quat()


def quat_from_matrix(matrix: np.ndarray) -> np.ndarray:
    """``Rotation.from_matrix(matrix).as_quat()`` (scalar last) of one 3x3 matrix."""
    if type(matrix) is not np.ndarray or matrix.dtype != np.float64:
        matrix = np.asarray(matrix, dtype=np.float64)
    (a, b, c), (d, e, f), (g, h, i) = matrix.tolist()
    # The Gramian's entries, each checked as scipy's np.isclose would with a margin; a NaN
    # fails every comparison and goes to scipy as well.
    if not (abs(a * a + b * b + c * c - 1.0) <= _DIAGONAL
            and abs(d * d + e * e + f * f - 1.0) <= _DIAGONAL
            and abs(g * g + h * h + i * i - 1.0) <= _DIAGONAL
            and abs(a * d + b * e + c * f) <= _OFF_DIAGONAL
            and abs(a * g + b * h + c * i) <= _OFF_DIAGONAL
            and abs(d * g + e * h + f * i) <= _OFF_DIAGONAL
            # orthonormal rows: the determinant is +-1; scipy refuses -1 (left-handed)
            and a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g) > 0.5):
        return _from_scipy(matrix)
    m = ((a, b, c), (d, e, f), (g, h, i))
    trace = a + e + i
    decision = (a, e, i, trace)
    choice = 0
    for k in (1, 2, 3):  # scipy's _argmax4: the first of equal maxima
        if decision[k] > decision[choice]:
            choice = k
    q = [0.0, 0.0, 0.0, 0.0]
    if choice != 3:
        j = (choice + 1) % 3
        k = (j + 1) % 3
        q[choice] = 1 - trace + 2 * m[choice][choice]
        q[j] = m[j][choice] + m[choice][j]
        q[k] = m[k][choice] + m[choice][k]
        q[3] = m[k][j] - m[j][k]
    else:
        q[0] = h - f
        q[1] = c - g
        q[2] = d - b
        q[3] = 1 + trace
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if norm == 0:  # not a rotation (scipy leaves it unnormalised); not reached from a Gramian check
        return _from_scipy(matrix)
    return np.array([q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm])


class ExactRotation:
    """The slice of scipy's ``Rotation`` that Meta-World's ``_get_quat_objects`` uses
    (``Rotation.from_matrix(m).as_quat()`` of one matrix), through :func:`quat_from_matrix`."""

    __slots__ = ("_quat",)

    def __init__(self, quat: np.ndarray) -> None:
        self._quat = quat

    @staticmethod
    def from_matrix(matrix: np.ndarray) -> "ExactRotation":
        return ExactRotation(quat_from_matrix(matrix))

    def as_quat(self) -> np.ndarray:
        return self._quat  # a new array per from_matrix, as scipy's
