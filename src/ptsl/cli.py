"""What every command of the package answers alike (``python -m ptsl...`` and the stage scripts
of ``pipeline/``): ``--help``; an argument it does not know, named in one line even when a
required one is missing too (:class:`ArgumentParser`); an expected error as one line
``error: <message>`` and exit status 2, never a traceback (:func:`run`).

It imports nothing of the package but the errors of :mod:`ptsl.core.errors`, so that every layer
may use it (tests/unit/test_import_layers.py) and no stage's cache key holds it: it computes no
number. The stage scripts add their signal handling on top (:mod:`ptsl.ops.stage`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Sequence

from .core.errors import (ConfigError, CorruptFileError, EnvCheckError, GraphCaptureError,
                          TrainingDiverged, WriteError)

#: Errors whose message already says what is wrong and what to do.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError, FileNotFoundError, EnvCheckError, TrainingDiverged, CorruptFileError, WriteError,
    GraphCaptureError)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose :meth:`parse_args` names an unknown option before anything else
    (argparse reports a missing required argument first, and a mistyped required option, say
    ``--studdy``, would read as if it had not been given). Help keeps the docstring's layout."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None,
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        unknown = self.unknown_options(argv)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_args(argv, namespace)

    def unknown_options(self, argv: Sequence[str]) -> list[str]:
        """The tokens of ``argv`` that look like options and that neither this parser nor any
        of its sub-commands knows (a unique prefix of a long option counts as known, as
        argparse reads it); everything after ``--`` is a value."""
        known = _option_strings(self)
        out = []
        for token in argv:
            if token == "--":
                break
            if (token == "-" or token[:1] not in self.prefix_chars
                    or self._negative_number_matcher.match(token)):  # a value such as -3
                continue
            name = token.split("=", 1)[0]
            if name in known or (name.startswith("--") and self.allow_abbrev
                                 and any(k.startswith(name) for k in known)):
                continue
            if not name.startswith("--") and name[:2] in known:  # -n3: a short one with its value
                continue
            out.append(token)
        return out


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its sub-commands' parsers."""
    out: set[str] = set()
    for action in parser._actions:
        out.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _option_strings(sub)
    return out


@dataclass(frozen=True)
class Bounded:
    """An argparse ``type`` for a number in a range (:func:`whole`, :func:`real`): the text
    converted by ``convert`` where ``ok`` holds, else one line that says what is ``allowed``.
    ``outside`` are values it refuses (the one at or just below its range, and above it where
    it has an upper bound), with which a test walks every command's numeric arguments."""

    convert: Callable[[str], Any]
    ok: Callable[[Any], bool]
    allowed: str
    outside: tuple[str, ...]

    def __call__(self, text: str) -> Any:
        try:
            value = self.convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}; allowed: {self.allowed}") from None
        if not self.ok(value):
            raise argparse.ArgumentTypeError(f"{text!r}; allowed: {self.allowed}")
        return value


def whole(minimum: int, maximum: int | None = None) -> Bounded:
    """An argparse ``type``: a whole number from ``minimum`` to ``maximum`` (None: no bound),
    refused in one line that says what is allowed."""
    allowed = (f"a whole number >= {minimum}" if maximum is None
               else f"a whole number from {minimum} to {maximum}")
    return Bounded(int, lambda v: v >= minimum and (maximum is None or v <= maximum), allowed,
                   (str(minimum - 1), *(() if maximum is None else (str(maximum + 1),))))


def real(low: float, high: float | None = None, *, inclusive: bool = False) -> Bounded:
    """An argparse ``type``: a number above ``low`` and below ``high`` (None: no bound), or
    with ``inclusive`` from ``low`` to ``high``, bounds allowed; refused in one line that says
    what is allowed."""
    if inclusive:
        allowed = (f"a number >= {low:g}" if high is None
                   else f"a number from {low:g} to {high:g}")
        # NaN fails both comparisons.
        return Bounded(float, lambda v: v >= low and (high is None or v <= high), allowed,
                       (f"{low - 1:g}", *(() if high is None else (f"{high + 1:g}",))))
    allowed = (f"a number above {low:g}" if high is None
               else f"a number between {low:g} and {high:g}, both excluded")
    return Bounded(float, lambda v: v > low and (high is None or v < high), allowed,
                   (f"{low:g}", *(() if high is None else (f"{high:g}",))))


def run(main: Callable[[], int | None],
        errors: tuple[type[BaseException], ...] = ()) -> NoReturn:
    """Run a command's ``main`` and exit with its status (None: 0). One of :data:`USER_ERRORS`,
    or of ``errors``, prints ``error: <message>`` and exits with 2; Ctrl-C exits with 130."""
    try:
        status = main()
    except (*USER_ERRORS, *errors) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(status or 0)
