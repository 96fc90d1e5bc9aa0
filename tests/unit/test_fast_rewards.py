"""Meta-World's reward tolerance for one number (ptsl.core.fast_rewards) against its own, bit
for bit, over the inputs Meta-World's reward functions give it and the ones it refuses."""

from __future__ import annotations

import numpy as np
import pytest
from metaworld.utils import reward_utils

from ptsl.core.fast_rewards import REWARD_UTILS, tolerance


def _cases():
    rng = np.random.default_rng(0)
    for sigmoid in ("long_tail", "gaussian"):
        for value_at_margin in (0.1, 0.5):
            for bounds in ((0, 0.05), (0.0, 0.02), (-0.01, 0.01), (np.float64(0.1), 0.3)):
                for margin in (0, 0.0, 1, 0.37, np.float64(0.2513), 1e-9):
                    xs = list(rng.normal(0, 0.3, 40)) + [0, 0.05, -0.0, 1e300, np.inf, np.nan]
                    for x in xs:
                        for cast in (float, np.float64):
                            yield cast(x), bounds, margin, sigmoid, value_at_margin


def test_scalar_inputs_give_meta_world_bits_and_types():
    n = 0
    for x, bounds, margin, sigmoid, value in _cases():
        want = reward_utils.tolerance(x, bounds=bounds, margin=margin, sigmoid=sigmoid,
                                      value_at_margin=value)
        got = tolerance(x, bounds=bounds, margin=margin, sigmoid=sigmoid, value_at_margin=value)
        assert type(got) is type(want) and np.float64(got).tobytes() == \
            np.float64(want).tobytes(), (x, bounds, margin, sigmoid, value, got, want)
        n += 1
    assert n == 8832  # every case above ran


def test_arrays_other_sigmoids_and_bad_bounds_go_to_meta_world():
    x = np.array([0.0, 0.3, 2.0])
    np.testing.assert_array_equal(tolerance(x, (0, 0.1), 0.5, "long_tail"),
                                  reward_utils.tolerance(x, (0, 0.1), 0.5, "long_tail"))
    assert tolerance(0.4, (0, 0.1), 0.5, "linear") == \
        reward_utils.tolerance(0.4, (0, 0.1), 0.5, "linear")
    with pytest.raises(ValueError, match="Lower bound must be <= upper bound"):
        tolerance(0.4, (0.2, 0.1), 0.5, "long_tail")
    with pytest.raises(ValueError, match="must be non-negative"):
        tolerance(0.4, (0, 0.1), -1.0, "long_tail")
    assert REWARD_UTILS.tolerance is tolerance
    assert REWARD_UTILS.hamacher_product is reward_utils.hamacher_product
