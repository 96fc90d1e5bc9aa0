"""Weights-only files with a checksum beside them: ``model.pt`` and the resume checkpoints.

A file holds tensors and plain values only (dicts, lists, tuples, numbers, strings, None), so it
is read with ``torch.load(weights_only=True)`` and nothing in it can run code. NumPy arrays and
scalars (replay rows, random-generator and normaliser state) are stored as tensors with a marker
and come back with their dtype. Every file carries ``format`` and the project version, and
``<file>.sha256`` beside it holds its SHA-256, verified before the file is unpickled.

Writing goes to temp files first, so a kill or a full disk never leaves a half-written file under
the final name; a failed write raises :class:`ptsl.io.WriteError` naming the file.
"""

from __future__ import annotations

import hashlib
import io
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from . import faults
from .io import CorruptFileError, WriteError

FORMAT = 2  # 1: pickled meta (no checksum); 2: weights-only + checksum + version
_ARRAY, _SCALAR = "__ndarray__", "__npscalar__"


def project_version() -> str:
    """The installed ``ptsl`` version (``0+unknown`` when run from a bare source tree)."""
    try:
        return version("ptsl")
    except PackageNotFoundError:
        return "0+unknown"


def _pack(obj: Any) -> Any:
    """NumPy values -> marked tensors, recursively; everything else as is."""
    if isinstance(obj, np.ndarray):
        return {_ARRAY: torch.from_numpy(np.ascontiguousarray(obj))}
    if isinstance(obj, np.generic):
        return {_SCALAR: str(obj.dtype), "value": obj.item()}
    if isinstance(obj, Mapping):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj: Any) -> Any:
    if isinstance(obj, dict):
        if _ARRAY in obj:
            return obj[_ARRAY].numpy()
        if _SCALAR in obj:
            return np.dtype(obj[_SCALAR]).type(obj["value"])
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v) for v in obj)
    return obj


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_bytes(path: Path, data: bytes, role: str) -> None:
    """``data`` to ``path`` through a temp file (fsynced, then renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(path, role, exc) from None


def save(path: str | Path, payload: Mapping[str, Any], role: str,
         fault_point: str | None = None) -> None:
    """Write ``payload`` (plus format and version) to ``path`` and its checksum beside it.

    The checksum is written first: a kill between the two renames leaves a file whose checksum
    does not match, which :func:`load` reports (and resume skips), never a silent mix.
    """
    path = Path(path)
    buf = io.BytesIO()
    # The archive's inner folder is named after the file; a fixed name keeps the bytes identical
    # wherever the file is written (DVC hashes them).
    torch.save({"format": FORMAT, "ptsl_version": project_version(), **_pack(dict(payload))},
               buf)
    data = buf.getvalue()
    _write_bytes(checksum_path(path), (hashlib.sha256(data).hexdigest() + "\n").encode(),
                 f"checksum of the {role}")
    if fault_point:  # the worst moment to die: new checksum, old (or no) data
        faults.point(fault_point)
    try:
        _write_bytes(path, data, role)
    except WriteError:
        checksum_path(path).unlink(missing_ok=True)
        raise


def load(path: str | Path, role: str, fix: str = "") -> dict[str, Any]:
    """Read a file written by :func:`save`: checksum verified, weights only, format checked.

    A missing, truncated, altered or foreign file is a :class:`CorruptFileError` naming the file
    and its ``role``; ``fix`` says what to do about it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {role} here")
    data = path.read_bytes()
    sums = checksum_path(path)
    if not sums.is_file():
        raise CorruptFileError(path, role, f"its checksum file {sums.name} is missing", fix)
    want = sums.read_text().strip()
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise CorruptFileError(path, role, f"SHA-256 {got[:12]}… does not match {sums.name} "
                                           f"({want[:12]}…): truncated or altered", fix)
    try:
        blob = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means the file is unusable
        raise CorruptFileError(path, role, f"not a weights-only file: {type(exc).__name__}",
                               fix) from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        found = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        raise CorruptFileError(path, role, f"format {found!r}, this version reads {FORMAT}", fix)
    return _unpack(blob)


def differences(saved: Any, current: Any, prefix: str = "") -> list[str]:
    """``key: saved -> current`` for every leaf that differs between two nested dicts."""
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        out = []
        for k in sorted(set(saved) | set(current), key=str):
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in saved or k not in current:
                out.append(f"{key}: {'absent' if k not in saved else saved[k]!r} there, "
                           f"{'absent' if k not in current else current[k]!r} here")
            else:
                out.extend(differences(saved[k], current[k], key))
        return out
    norm = (lambda v: list(v) if isinstance(v, tuple) else v)  # noqa: E731
    if norm(saved) != norm(current):
        return [f"{prefix}: {saved!r} there, {current!r} here"]
    return []

