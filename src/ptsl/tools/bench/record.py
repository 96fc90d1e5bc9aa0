"""The benchmark's record: its sections, and the JSON file that grows by one section as each
finishes (rewritten atomically every time). A section that fails, or a run cut off by a time
limit, keeps what the earlier sections measured on disk, and the file says which section failed
and why."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.errors import ConfigError
from ...core.files import write_json

#: The sections in the order they run, each with the key of its figures in the record.
SECTIONS = {"envs": "envs", "updates": "updates", "loop": "loop", "study": "study",
            "gpu": "gpu_sharing", "node": "node"}


class SectionFailed(Exception):
    """A section that stopped part-way: the message says why, ``partial`` holds what it measured
    before (recorded beside the failure)."""

    def __init__(self, message: str, partial: dict[str, Any]) -> None:
        super().__init__(message)
        self.partial = partial


def parse_only(text: str) -> tuple[str, ...]:
    """``--only``'s comma-separated value -> the sections named, in the benchmark's order; a
    ConfigError naming the allowed sections for an unknown or empty one."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SECTIONS] or ([] if names else [text])
    if bad:
        raise ConfigError(f"--only: unknown section {bad[0]!r}; allowed: a comma-separated list "
                          f"of {', '.join(SECTIONS)}")
    return tuple(s for s in SECTIONS if s in names)


class Record:
    """The record of one benchmark run: ``result`` (device, versions, ... and each section's
    figures under its key), written to ``path`` after every section, ending with what
    ``summarise(result)`` derives from the figures so far (targets, costs)."""

    def __init__(self, path: Path, result: dict[str, Any],
                 summarise: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.path = Path(path)
        self.result = result
        self._summarise = summarise
        self._summary_keys: list[str] = []
        self._started = time.perf_counter()
        result["sections"] = {}

    def run(self, name: str, measure: Callable[[], dict[str, Any]]) -> bool:
        """Run section ``name`` and write the record; True when it measured everything. An
        exception is recorded (and its traceback printed) instead of raised; an interruption
        is recorded and raised."""
        t0 = time.perf_counter()
        try:
            figures, status = measure(), {"status": "done"}
        except SectionFailed as exc:
            figures, status = exc.partial, {"status": "failed", "error": str(exc)}
        except KeyboardInterrupt:
            self._set(name, None, {"status": "interrupted"}, t0)
            raise
        except Exception as exc:
            traceback.print_exc()
            figures = None
            status = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        self._set(name, figures, status, t0)
        return status["status"] == "done"

    def skip(self, name: str, why: str) -> None:
        """Record that section ``name`` was not run, and why."""
        self.result["sections"][name] = {"status": "skipped", "why": why}
        self.write()

    def failures(self) -> dict[str, str]:
        """Section -> why, for every section that failed or was interrupted."""
        return {name: s.get("error", s["status"]) for name, s in self.result["sections"].items()
                if s["status"] in ("failed", "interrupted")}

    def write(self) -> None:
        """Bring the summary up to date (last in the file) and replace the file atomically."""
        for key in self._summary_keys:
            self.result.pop(key, None)
        try:
            summary = self._summarise(self.result)
        except Exception as exc:  # the figures matter more than what is derived from them
            traceback.print_exc()
            summary = {"summary_error": f"{type(exc).__name__}: {exc}"}
        summary["wall_seconds"] = round(time.perf_counter() - self._started, 1)
        self.result.update(summary)
        self._summary_keys = list(summary)
        write_json(self.path, self.result, role="benchmark record")

    def _set(self, name: str, figures: dict[str, Any] | None, status: dict[str, Any],
             t0: float) -> None:
        if figures is not None:
            self.result[SECTIONS[name]] = figures
        self.result["sections"][name] = {**status,
                                         "seconds": round(time.perf_counter() - t0, 1)}
        self.write()
