"""Fault injection for the hardening tests: kill the real stage process at a named point, or
feed it a NaN reward, so that the tests exercise the real recovery paths.

Off unless ``PTSL_FAULT`` is set, e.g. ``PTSL_FAULT=kill@checkpoint:2`` (SIGKILL at the second
checkpoint write, after the data is written and before it is renamed into place) or
``PTSL_FAULT=nan_reward@30`` (every task's reward at vector step 30 becomes NaN). Points:
``warmup`` (a random-action step), ``update`` (after a gradient step), ``eval`` (mid-evaluation),
``checkpoint`` (inside a resume-checkpoint write), ``outputs`` (inside the output write).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

ENV = "PTSL_FAULT"
POINTS = ("warmup", "update", "eval", "checkpoint", "outputs")


@dataclass(frozen=True)
class Faults:
    """The faults requested by ``PTSL_FAULT`` (none by default)."""

    kill_point: str | None = None
    kill_at: int = 1          # the n-th time the point is reached
    nan_reward_step: int | None = None

    @staticmethod
    def from_env() -> "Faults":
        spec = os.environ.get(ENV, "").strip()
        if not spec:
            return Faults()
        kill_point, kill_at, nan_step = None, 1, None
        for part in spec.split(","):
            kind, _, arg = part.strip().partition("@")
            if kind == "kill":
                kill_point, _, n = arg.partition(":")
                kill_at = int(n) if n else 1
                if kill_point not in POINTS:
                    raise ValueError(f"{ENV}: unknown point {kill_point!r}; allowed: "
                                     f"{', '.join(POINTS)}")
            elif kind == "nan_reward":
                nan_step = int(arg)
            else:
                raise ValueError(f"{ENV}: unknown fault {part!r}; allowed: kill@<point>[:<n>], "
                                 "nan_reward@<step>")
        return Faults(kill_point, kill_at, nan_step)


_faults = Faults.from_env()
_reached: dict[str, int] = {}


def point(name: str) -> None:
    """Mark that execution reached ``name``; SIGKILL the process if a test asked for it here."""
    if _faults.kill_point != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == _faults.kill_at:
        os.kill(os.getpid(), signal.SIGKILL)


def nan_reward(step: int) -> bool:
    """Whether the environment's reward at vector step ``step`` is to be replaced by NaN."""
    return _faults.nan_reward_step == step
