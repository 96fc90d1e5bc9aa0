"""Interleaved timing: every contender runs once per round, in a rotating order, so a noisy
machine slows all of them alike; ratios are taken within each round (paired), then the median
over rounds, so that a slow stretch of the machine cancels out."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: A contender: does some work and returns how many units (steps, updates, FLOPs) it did.
Work = Callable[[], float]


@dataclass
class Rates:
    """Units per second of each round, per contender."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name])

    def best(self, name: str) -> float:
        return max(self.samples[name])

    def ratio(self, a: str, b: str) -> float:
        """Median over rounds of ``rate(a) / rate(b)`` measured in the same round."""
        return statistics.median(x / y for x, y in zip(self.samples[a], self.samples[b]))


def interleave(contenders: dict[str, Work], rounds: int, warmup: bool = True,
               progress: Callable[[str], None] | None = None) -> Rates:
    """Run every contender once per round (after one untimed warm-up call each) and record its
    rate in units per second."""
    rates = Rates({name: [] for name in contenders})
    if warmup:
        for name, work in contenders.items():
            if progress:
                progress(f"warm-up {name}")
            work()
    names = list(contenders)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            work = contenders[name]
            t0 = time.perf_counter()
            units = work()
            rates.samples[name].append(units / (time.perf_counter() - t0))
        if progress:
            progress(f"round {r + 1}/{rounds}")
    return rates
