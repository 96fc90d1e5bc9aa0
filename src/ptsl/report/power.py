"""Power of the paired comparison a study reports (:mod:`ptsl.report.contrasts`): how likely a
two-sided paired Student t test at level ``alpha`` is to tell a true mean difference ``effect``
from none, over ``n`` pairs whose differences spread with standard deviation ``sd``; and how many
pairs a study needs for a given power.

The test rejects when ``|mean / (s / sqrt(n))|`` exceeds the t quantile with ``n - 1`` degrees of
freedom; under a true difference that statistic follows the noncentral t with noncentrality
``effect / sd * sqrt(n)``. The spread a plan takes from an earlier study is itself uncertain:
:func:`sd_upper_bound` gives a one-sided upper confidence bound on it (chi-square on ``n - 1``
degrees of freedom), a pessimistic spread to plan with.
"""

from __future__ import annotations

import math

#: The conventional level of the test and power of a plan.
ALPHA, POWER = 0.05, 0.8


def paired_power(n: int, effect: float, sd: float, alpha: float = ALPHA) -> float:
    """The probability that a two-sided paired t test at ``alpha`` over ``n`` pairs rejects no
    difference when the true mean difference is ``effect`` and the differences' sd is ``sd``."""
    from scipy import stats

    if n < 2:
        raise ValueError(f"a paired t test needs at least 2 pairs, got {n}")
    if not sd > 0:
        raise ValueError(f"the differences' sd must be above 0, got {sd}")
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = effect / sd * math.sqrt(n)
    upper, lower = stats.nct.sf(crit, df, nc), stats.nct.cdf(-crit, df, nc)
    # scipy returns NaN for the tail away from a large noncentrality (at 13.5 with 7 degrees of
    # freedom); beyond 8 that tail is below 1e-15 (1e-25 at 10), so it counts as 0.
    if abs(nc) > 8:
        upper, lower = (upper, 0.0) if nc > 0 else (0.0, lower)
    return float(upper + lower)


def smallest_effect(n: int, sd: float, power: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest true gain that the test over ``n`` pairs at spread ``sd`` tells from none
    with at least ``power`` (bisection: the power grows with the gain)."""
    lo, hi = 0.0, 20 * sd
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if paired_power(n, mid, sd, alpha) >= power else (mid, hi)
    return hi


def pairs_needed(effect: float, sd: float, power: float = POWER, alpha: float = ALPHA,
                 most: int = 1_000) -> int | None:
    """The fewest pairs (at least 2) whose test has at least ``power`` for ``effect`` at spread
    ``sd``; None where even ``most`` pairs fall short (an effect of 0, say). Counted up one by
    one: scipy's noncentral t loses its accuracy at the noncentralities a bisection would try
    at thousands of pairs."""
    for n in range(2, most + 1):
        if paired_power(n, effect, sd, alpha) >= power:
            return n
    return None


def sd_upper_bound(sd: float, n: int, level: float = POWER) -> float:
    """The one-sided ``level`` upper confidence bound on the population sd, from the sample sd
    ``sd`` of ``n`` values: ``sd * sqrt((n - 1) / chi2.ppf(1 - level, n - 1))``."""
    from scipy import stats

    if n < 2:
        raise ValueError(f"a spread needs at least 2 values, got {n}")
    return float(sd * math.sqrt((n - 1) / stats.chi2.ppf(1 - level, n - 1)))
