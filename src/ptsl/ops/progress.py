"""What the grid says while it runs: the counts of its stages whenever they change, and every
:data:`DETAIL_EVERY_S` seconds where each running training stage is, read from the progress bar
its own log holds (a study's stage runs for hours; the counts alone would not change for that
long)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

#: Seconds between the lines that say where each running stage is.
DETAIL_EVERY_S = 600.0
#: Bytes read from the end of a stage's log to find its progress bar's last state.
TAIL_BYTES = 8192

# The training loop's tqdm bar (ptsl.core.loop): "desc:  35%|███▍  | 34820/100000
# [37:12<1:08:48, 15.79step/s, success=0.20]"; below one step a second tqdm writes "s/step".
_BAR = re.compile(r"(\d+)/(\d+) \[[\d:]+<([\d:?]+), *([\d.]+|\?)(step/s|s/step)")


def bar_state(log: Path) -> str | None:
    """The last state of the progress bar in a training stage's ``log``, as one phrase:
    ``"34,820 of 100,000 steps (35%), 15.8 steps/s, 1:08:48 left"``; None while the log is
    not on this machine (a cluster node's) or holds no bar yet."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            tail = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    for line in reversed(re.split(r"[\r\n]", tail)):
        m = _BAR.search(line)
        if m:
            done, total, left, rate, unit = m.groups()
            n, t = int(done), int(total)
            if rate == "?":
                speed = "rate not known yet"
            else:
                per_s = float(rate) if unit == "step/s" else 1.0 / max(float(rate), 1e-9)
                speed = f"{per_s:.1f} steps/s"
            when = f"{left} left" if left != "?" else "time left not known yet"
            return f"{n:,} of {t:,} steps ({n / max(t, 1):.0%}), {speed}, {when}"
    return None


class Progress:
    """Counts of done / running / failed / left, printed whenever they change; with ``logs``
    (stage -> its log), every ``every`` seconds one line per running stage saying where its
    progress bar is."""

    def __init__(self, total: int, logs: Mapping[str, Path] | None = None,
                 every: float = DETAIL_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.done, self.failed = total, 0, 0
        self.running: set[str] = set()
        self._last = ""
        self._logs = dict(logs or {})
        self._every, self._clock = every, clock
        self._next = clock() + every

    def show(self) -> None:
        """The counts, when they changed; then the running stages' places, when due."""
        left = self.total - self.done - self.failed - len(self.running)
        line = (f"grid: {self.done} done, {len(self.running)} running, {self.failed} failed, "
                f"{left} left of {self.total}")
        if line != self._last:
            print(line, flush=True)
            self._last = line
        now = self._clock()
        if now >= self._next:
            self._next = now + self._every
            for stage in sorted(self.running):
                log = self._logs.get(stage)
                state = bar_state(log) if log is not None else None
                print(f"grid: {stage} at {state}" if state else
                      f"grid: {stage} running, no progress bar in its log here yet ({log})",
                      flush=True)
