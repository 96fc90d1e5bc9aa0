"""numpy as the fast Meta-World classes see it (ptsl.core.fast_numpy): ``linalg.norm`` against
numpy's own, bit for bit, and everything else numpy's own object."""

from __future__ import annotations

import numpy as np

from ptsl.core.fast_numpy import NUMPY, norm


def test_norm_of_vectors_is_numpys_to_the_bit():
    rng = np.random.default_rng(0)
    cases = [rng.normal(size=n) * scale for n in (1, 2, 3, 4, 7) for scale in (1e-3, 1, 1e3)
             for _ in range(200)]
    cases += [np.arange(9.0)[::2], np.zeros(3), np.array([np.inf, 1.0]), np.array([np.nan])]
    for x in cases:
        for ord in (None, 2):
            want = np.linalg.norm(x, ord=ord)
            got = norm(x, ord=ord)
            assert type(got) is type(want) and got.tobytes() == want.tobytes(), (x, ord)


def test_other_arguments_go_to_numpy():
    m = np.arange(6.0).reshape(2, 3)
    assert norm(m) == np.linalg.norm(m)
    np.testing.assert_array_equal(norm(m, axis=1), np.linalg.norm(m, axis=1))
    assert norm([3, 4]) == 5.0 and norm(np.array([3, 4])) == 5.0
    assert norm(np.array([1.0, -2.0]), ord=1) == 3.0
    assert NUMPY.linalg.norm is norm and NUMPY.linalg.inv is np.linalg.inv
    assert NUMPY.random is np.random and NUMPY.float64 is np.float64 and NUMPY.clip is np.clip
