"""Shared entry-point handling for the stage scripts: one clear line and a non-zero exit on
bad input or a failed check, instead of a traceback."""

from __future__ import annotations

import sys
from typing import Callable

from .agent import TrainingDiverged
from .config import ConfigError
from .envcheck import EnvCheckError
from .io import CorruptFileError

# Errors whose message already says what is wrong and what to do.
USER_ERRORS = (ConfigError, FileNotFoundError, EnvCheckError, TrainingDiverged, CorruptFileError)


def run_stage(main: Callable[[], None]) -> None:
    """Run ``main``; a user-facing error prints ``error: <message>`` and exits with 2."""
    try:
        main()
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
