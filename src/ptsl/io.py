"""Atomic file writes: a reader (or DVC) never sees a half-written output."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any


class CorruptFileError(ValueError):
    """A file the pipeline reads is truncated, corrupt or not what its role needs. The message
    names the file, its role and what to do (a stage prints it as one line)."""

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


def write_text_atomic(path: str | Path, text: str, role: str = "output") -> None:
    """Write ``text`` through a temp file renamed into place; a failure leaves ``path`` as it was
    and raises :class:`WriteError`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(path, role, exc) from None


def write_json_atomic(path: str | Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def replace_dir(src: str | Path, dst: str | Path) -> None:
    """Put folder ``src`` where ``dst`` is (same filesystem), removing the old ``dst``."""
    dst = Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(src, dst)
