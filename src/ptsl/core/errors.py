"""The errors a run reports to its user in one line: the message says what is wrong and what to
do, and a stage prints it as ``error: <message>`` (see :mod:`ptsl.ops.stage`)."""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range; the message
    names the dotted key (``experiments.mt10_care.hidden_dim``) and what is allowed."""


class TrainingDiverged(RuntimeError):
    """A loss or a weight left the safe range (the reference aborts when the critic loss exceeds
    1e8); the message names the step and the value."""


class CorruptFileError(ValueError):
    """A file the pipeline reads is truncated, corrupt or not what its role needs. The message
    names the file, its role and what to do."""

    def __init__(self, path: str | Path, role: str, detail: str, fix: str = "") -> None:
        self.path = Path(path)
        msg = f"{path}: {role} is unreadable ({detail})"
        super().__init__(msg + (f"; {fix}" if fix else ""))


class WriteError(OSError):
    """Writing a file failed (full disk, file-size limit, permissions); the message names the
    file and its role, and says that what was there before is unchanged."""

    def __init__(self, path: str | Path, role: str, exc: OSError) -> None:
        why = exc.strerror or str(exc)
        super().__init__(exc.errno, f"{path}: could not write the {role} ({why}); nothing was "
                                    "replaced: free space (or fix the folder) and run again")
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.strerror)


class EnvCheckError(RuntimeError):
    """The machine cannot run the pipeline (a package at another version, MuJoCo that does not
    load, a benchmark that does not build); the message says what to fix."""


class GraphCaptureError(RuntimeError):
    """Capturing the update as a CUDA graph failed; the message names the cause and the switch
    that trains without capture (``PTSL_GRAPH=0``)."""
