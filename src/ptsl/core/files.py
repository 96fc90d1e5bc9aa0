"""Writes that a reader (or DVC) never sees half done: a file goes through a temp file beside it
that is renamed into place, a folder is built aside and swapped in whole. A failed write raises
:class:`~ptsl.core.errors.WriteError` naming the file and leaves what was there unchanged."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Sequence

from .errors import WriteError


def write_atomic(path: str | Path, data: bytes | str, role: str = "output") -> None:
    """Write ``data`` to ``path`` through a temp file beside it, flushed to disk and renamed."""
    path = Path(path)
    # The process id keeps concurrent writers of one shared file (the task cache) apart.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(path, role, exc) from None


def json_text(data: Any) -> str:
    """The project's JSON layout: two-space indent, keys in the order given, newline last."""
    return json.dumps(data, indent=2) + "\n"


def write_json(path: str | Path, data: Any, role: str = "output") -> None:
    """:func:`write_atomic` of ``data`` as :func:`json_text`."""
    write_atomic(path, json_text(data), role)


def replace_folder(src: str | Path, dst: str | Path) -> None:
    """Put folder ``src`` where ``dst`` is (same filesystem), removing the old ``dst``."""
    dst = Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(src, dst)


def swap_in(staging: str | Path, out_dir: str | Path, names: Sequence[str]) -> None:
    """Move each of ``names`` (files or folders) from ``staging`` into ``out_dir``, replacing
    what is there whole: the old entry moves into ``staging`` first, so the caller's cleanup of
    ``staging`` removes it (for outputs that share their folder with others)."""
    staging, out_dir = Path(staging), Path(out_dir)
    old = staging / ".old"
    old.mkdir()
    for name in names:
        target = out_dir / name
        if target.exists() or target.is_symlink():
            os.replace(target, old / name)
        os.replace(staging / name, target)


@contextlib.contextmanager
def folder_aside(dst: str | Path, role: str) -> Iterator[Path]:
    """A fresh folder beside ``dst`` to build into; when the block ends without an error it
    replaces ``dst`` whole, else it is removed and ``dst`` is left as it was. A failed write is a
    :class:`WriteError` naming ``dst`` and ``role``. A folder left by a killed run is removed
    first (its name, ``.<name>.tmp``, is one DVC ignores)."""
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        yield tmp
        replace_folder(tmp, dst)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise WriteError(dst, role, OSError(exc.errno, why)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
