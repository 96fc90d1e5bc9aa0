"""The exact quaternion of a rotation matrix (ptsl.core.rotation) against scipy's, bit for bit."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ptsl.core.rotation import ExactRotation, quat_from_matrix


def _mujoco_matrix(quat: np.ndarray) -> np.ndarray:
    """The 3x3 matrix MuJoCo makes of a unit quaternion, as it fills ``xmat``."""
    out = np.empty(9)
    mujoco.mju_quat2Mat(out, quat / np.linalg.norm(quat))
    return out.reshape(3, 3)


def test_matrices_as_mujoco_makes_them_convert_as_scipy_converts_them():
    """Random rotations, and rotations about one axis or with rounded components (ties in
    Markley's choice of the largest term, zeros), every branch of the conversion."""
    rng = np.random.default_rng(0)
    quats = rng.normal(size=(6000, 4))
    quats[1000:2000, rng.integers(0, 4, 1000)] = 0.0
    quats[2000:3000] = np.round(quats[2000:3000])
    quats[3000:3100] = [[0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]] * 25
    for quat in quats:
        if not quat.any():
            continue
        m = _mujoco_matrix(quat)
        assert quat_from_matrix(m).tobytes() == Rotation.from_matrix(m).as_quat().tobytes(), m
        assert ExactRotation.from_matrix(m).as_quat().tobytes() == \
            Rotation.from_matrix(m).as_quat().tobytes()


@pytest.mark.parametrize("matrix", [np.diag([1.0, 1.0, 1.0 + 1e-9]),  # scipy orthogonalises
                                    np.array([[0, -0.5, 0], [0.5, 0, 0], [0, 0, 0.5]])])
def test_a_matrix_that_is_not_a_rotation_is_left_to_scipy(matrix):
    assert quat_from_matrix(matrix).tobytes() == Rotation.from_matrix(matrix).as_quat().tobytes()


def test_a_left_handed_matrix_fails_as_in_scipy():
    with pytest.raises(ValueError, match="Non-positive determinant"):
        quat_from_matrix(-np.eye(3))
