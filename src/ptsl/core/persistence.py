"""Everything that goes to disk as weights: the file format, saved agents (``model.pt``) and the
resume checkpoints of an interrupted run.

A file holds tensors and plain values only (dicts, lists, tuples, numbers, strings, None), so it
is read with ``torch.load(weights_only=True)`` and nothing in it can run code. NumPy arrays and
scalars (replay rows, random-generator and normaliser state) are stored as tensors with a marker
and come back with their dtype. Every file carries ``format`` and the project version, and
``<file>.sha256`` beside it holds its SHA-256, verified before the file is unpickled.

Writing goes to temp files first, so a kill or a full disk never leaves a half-written file under
the final name; a failed write raises :class:`~ptsl.core.errors.WriteError` naming the file.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from . import faults
from .agent.builders import Shapes, build_agent
from .agent.nets.task_encoder import PRETRAINED_TABLE_KEY
from .agent.sac import MultiTaskSAC
from .config import RunConfig
from .errors import CorruptFileError, WriteError
from .files import write_atomic

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
    write_atomic(checksum_path(path), hashlib.sha256(data).hexdigest() + "\n",
                 f"checksum of the {role}")
    if fault_point:  # the worst moment to die: new checksum, old (or no) data
        faults.point(fault_point)
    try:
        write_atomic(path, data, role)
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


@functools.cache
def code_digest() -> str:
    """A digest of the code that computes a run (every Python file of this folder, the one the
    training stages depend on): a resume checkpoint made by other code is not continued, which
    would give a run of neither version."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def version_difference(blob: Mapping[str, Any]) -> str | None:
    """``ptsl_version: 'x' there, 'y' here`` when a file was written by another project version
    (its weights may not fit this version's networks)."""
    return next(iter(differences({"ptsl_version": blob.get("ptsl_version")},
                                 {"ptsl_version": project_version()})), None)


# --------------------------------------------------------------------------------- saved agents


def save_agent(agent: MultiTaskSAC, path: str | Path) -> None:
    """Write ``agent``'s weights and rebuild information to ``path`` (``path.sha256`` beside
    it); :func:`load_agent` reads it back."""
    # The meta travels as one JSON string: pickle memoises repeated objects by identity, so a
    # nested dict whose strings happen to be shared (a resumed run's config) would pickle to
    # other bytes, and DVC hashes these bytes.
    save(path, {"meta_json": json.dumps(agent.meta, sort_keys=True),
                "model": agent.state_dict()}, "saved agent")


def load_agent(path: str | Path, device: torch.device | str = "cpu",
               expect: RunConfig | None = None) -> MultiTaskSAC:
    """Load an agent saved with :func:`save_agent` (the public ``ptsl.load_agent``).

    The file is read weights-only after its checksum (``model.pt.sha256``) is verified; one
    written by another project version, or (with ``expect``) trained under another config, is
    refused with a :class:`CorruptFileError` naming the fields that differ.

    >>> agent = load_agent("data/runs/mt10_mtsac-1/model.pt")
    >>> action = agent.act(obs, task_index)
    """
    p = Path(path)
    role = "saved agent"
    fix = "retrain it (`dvc repro` restores or re-runs its training stage)"
    blob = load(p, role, fix)
    other = version_difference(blob)
    if other:
        raise CorruptFileError(p, role, f"written by another project version ({other})", fix)
    meta = json.loads(blob["meta_json"])
    if expect is not None:
        diff = differences(meta["config"], expect.to_dict())
        if diff:
            raise CorruptFileError(p, role, "trained under another config: " + "; ".join(diff[:3])
                                   + (f" (+{len(diff) - 3} more)" if len(diff) > 3 else ""), fix)
    cfg = RunConfig.from_dict(meta["config"])
    shapes = Shapes(meta["obs_dim"], meta["action_dim"], len(meta["task_names"]))
    # The checkpoint carries CARE's frozen embedding table, so no embeddings file is needed here.
    table = blob["model"].get(f"task_encoder.{PRETRAINED_TABLE_KEY}")
    agent = build_agent(cfg, shapes, tuple(meta["task_names"]), device=device,
                        task_embeddings=None if table is None else table.cpu())
    agent.load_state_dict(blob["model"])
    return agent


# --------------------------------------------------------------------------- resume checkpoints


def checkpoint_device(state: Mapping[str, Any]) -> str:
    """The kind of device a resume checkpoint was made on. Checkpoints record it; for one made
    before they did, the agent's generator state tells (a CPU generator's is 5056 bytes, a CUDA
    one's 16)."""
    if "device" in state:
        return str(state["device"])
    cpu_state = torch.Generator().get_state().numel()
    return "cpu" if state["agent"]["generator"].numel() == cpu_state else "cuda"


@dataclass(frozen=True)
class CheckpointName:
    """What a resume checkpoint's file name says (:class:`ResumeCheckpoints` names them)."""

    experiment: str
    seed: int
    config_key: str
    step: int


#: ``<exp>-<seed>-<config key>-<step>.pt``: the experiment name may hold dashes.
_CHECKPOINT_NAME = re.compile(
    r"^(?P<exp>.+)-(?P<seed>\d+)-(?P<key>[0-9a-f]{16})-(?P<step>\d{9})\.pt$")


def parse_checkpoint_name(name: str) -> CheckpointName | None:
    """The fields of a resume checkpoint's file name, or None for any other name (for tools
    that read a running study's checkpoints from outside it)."""
    m = _CHECKPOINT_NAME.match(name)
    return None if m is None else CheckpointName(m["exp"], int(m["seed"]), m["key"],
                                                 int(m["step"]))


class ResumeCheckpoints:
    """Resume state in the ignored scratch folder: ``<exp>-<seed>-<config key>-<step>.pt``.

    A new checkpoint gets a new name and the older one is deleted only after it is complete, so a
    kill or a full disk while writing leaves the previous checkpoint intact. Loading takes the
    newest one that verifies; a corrupt one, one written by another project version or by other
    code (:func:`code_digest`), or one made on another kind of device (a CPU and a GPU draw random numbers differently, so the state
    of one cannot continue on the other), is skipped with a warning line, and checkpoints of the
    same run under another config are named with the fields that differ. ``scratch_dir`` None
    keeps no checkpoints.
    """

    def __init__(self, scratch_dir: Path | None, cfg: RunConfig) -> None:
        self.dir = None if scratch_dir is None else Path(scratch_dir)
        self.run = f"{cfg.name}-{cfg.seed}-"
        self.stem = f"{self.run}{cfg.key()}-"
        self.config = cfg.to_dict()

    def _files(self, prefix: str) -> list[Path]:
        if self.dir is None or not self.dir.is_dir():
            return []
        return sorted((p for p in self.dir.glob(f"{prefix}*.pt") if p.stem[-9:].isdigit()),
                      key=lambda p: p.stem[-9:], reverse=True)

    def load(self, device: str) -> dict[str, Any] | None:
        """The newest usable checkpoint of this run and config made on a ``device`` (``cpu``,
        ``cuda``) device, or None."""
        for path in self._files(self.stem):
            try:
                state = load(path, "resume checkpoint")
            except CorruptFileError as exc:
                print(f"warning: {exc}; trying an older one", file=sys.stderr)
                continue
            why = [d for d in (version_difference(state),) if d]
            why += differences({"code": state.get("code", "unrecorded")}, {"code": code_digest()})
            why += differences({"device": checkpoint_device(state)}, {"device": device})
            why += differences(state["config"], self.config, "config")
            if why:
                print(f"warning: {path}: not resuming from this checkpoint, it was made "
                      f"under another {'; '.join(why)}", file=sys.stderr)
                continue
            return state
        for path in self._files(self.run)[:1]:
            if not path.name.startswith(self.stem):
                print(f"note: {path} is a checkpoint of {self.run[:-1]} under another config "
                      "(its name carries the config key); this run starts from scratch",
                      file=sys.stderr)
        return None

    def save(self, step: int, state: dict[str, Any]) -> None:
        """Write the checkpoint of ``step``, then delete the older ones of this run."""
        if self.dir is None:
            return
        path = self.dir / f"{self.stem}{step:09d}.pt"
        save(path, {"config": self.config, "step": step, "code": code_digest(), **state},
             "resume checkpoint", fault_point="checkpoint")
        for old in self._files(self.stem):
            if old != path:
                self._unlink(old)
        self._clean()

    def remove(self) -> None:
        """Delete this run's checkpoints (the run finished)."""
        for path in self._files(self.stem):
            self._unlink(path)
        self._clean()

    def _clean(self) -> None:
        """Temp files and lone checksums left by a write that was killed or failed."""
        if self.dir is None or not self.dir.is_dir():
            return
        for stale in self.dir.glob(f".{self.stem}*.tmp"):
            stale.unlink(missing_ok=True)
        for sums in self.dir.glob(f"{self.stem}*.pt.sha256"):
            if not sums.with_suffix("").exists():
                sums.unlink(missing_ok=True)

    @staticmethod
    def _unlink(path: Path) -> None:
        path.unlink(missing_ok=True)
        checksum_path(path).unlink(missing_ok=True)
