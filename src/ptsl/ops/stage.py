"""What the stage scripts share: their ``--params`` and ``--out`` options (a run's stages
``--exp`` and ``--seed`` too); one clear line and a non-zero exit on bad input or a failed check, instead of a traceback (every command's rule,
:mod:`ptsl.cli`), and a ``kill`` that unwinds like Ctrl-C."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Callable

from ..cli import USER_ERRORS as COMMAND_ERRORS
from ..cli import ArgumentParser, whole
from ..core.config import MAX_SEED
from .tracking import TrackingError

# Errors whose message already says what is wrong and what to do: every command's, and the
# tracking store's.
USER_ERRORS = (*COMMAND_ERRORS, TrackingError)


def stage_parser(doc: str, out: Path | str, out_help: str,
                 seed_help: str | None = None) -> ArgumentParser:
    """A stage script's parser: ``doc`` as its help, ``--params`` (the params file) and ``--out``
    (``out_help``: what receives its outputs, ``out`` unless given); with ``seed_help``, a run's
    stage, whose ``--exp`` and ``--seed`` (``seed_help``: what the seed is to it) come first."""
    ap = ArgumentParser(description=doc)
    if seed_help is not None:
        ap.add_argument("--exp", required=True,
                        help="experiment name: a key of `experiments` in the params file")
        ap.add_argument("--seed", required=True, type=whole(0, MAX_SEED), help=seed_help)
    ap.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    ap.add_argument("--out", default=str(out), help=f"{out_help} (default: %(default)s)")
    return ap


def run_stage(main: Callable[[], None]) -> None:
    """Run ``main``; a user-facing error prints ``error: <message>`` and exits with 2."""
    # `kill` (SIGTERM, also what DVC and schedulers send) unwinds like Ctrl-C, so the stage ends
    # its MLflow run as KILLED and writes nothing half-done.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        main()
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("error: interrupted; `dvc repro` resumes from the last checkpoint", file=sys.stderr)
        sys.exit(130)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
