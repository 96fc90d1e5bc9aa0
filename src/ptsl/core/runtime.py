"""How a run computes on this machine: device, thread count, graph capture and environment
stepping.

These are choices of the machine, not of the experiment, so they are read from environment
variables and never from ``params.yaml``: a stage trained on a GPU box keeps the same DVC cache
key as one trained on a laptop, and a run cache filled on one kind of machine fans in on another.

- ``PTSL_DEVICE``: ``auto`` (CUDA when torch sees a GPU, else CPU; the default), ``cpu`` or ``cuda``.
- ``PTSL_THREADS``: torch's intra-op threads; ``0`` (the default) keeps torch's own choice.
- ``PTSL_GRAPH``: on CUDA, ``1`` (the default) replays the update as one captured CUDA graph
  (:mod:`ptsl.core.cuda`); ``0`` runs the same static step eagerly, with the same numbers. No
  effect on CPU.
- ``PTSL_VECTOR``: how the training environments step: ``sync`` (in this process), ``async``
  (one worker process per task) or ``auto`` (the default: ``async`` for several tasks where this
  process may use a core per task besides its own, else ``sync``). Both give the same
  transitions. An evaluation that runs each task on its own (``env.eval_ends_at_success``)
  spreads the tasks over one process per core unless it is ``sync`` (the same numbers).
- ``PTSL_CUDA_WAIT``: how a CUDA run's thread waits for the device when it needs a result on the
  host (the action of every step, the losses of every episode): ``block`` (the default) sleeps
  until the device is done, ``spin`` polls as CUDA does by default, holding a core for the whole
  wait. Many runs sharing one GPU wait most of the time, and their polling takes the cores their
  environments need. The same numbers either way; no effect on CPU.

On CUDA, :meth:`Runtime.apply` keeps float32 matrix products in full FP32 (no TF32), and
:func:`precision` records what the process computes with.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .errors import ConfigError

DEVICE_ENV = "PTSL_DEVICE"
THREADS_ENV = "PTSL_THREADS"
#: Retired: the agent has one update path. Setting it is refused, so nobody believes it acts.
FAST_ENV = "PTSL_FAST"
GRAPH_ENV = "PTSL_GRAPH"
VECTOR_ENV = "PTSL_VECTOR"
WAIT_ENV = "PTSL_CUDA_WAIT"
#: Set by some CUDA images: cuBLAS then computes float32 products in TF32 whatever torch says.
TF32_OVERRIDE_ENV = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
DEVICES = ("auto", "cpu", "cuda")
VECTOR_MODES = ("auto", "sync", "async")
WAIT_MODES = ("block", "spin")
_SWITCH = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


@dataclass(frozen=True)
class Runtime:
    """Device, thread count, graph capture, environment stepping and the wait for a CUDA device
    of one process (see the module docstring)."""

    device: str = "auto"
    threads: int = 0
    graph: bool = True
    vector: str = "auto"
    wait: str = "block"

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"{DEVICE_ENV}: unknown device {self.device!r}; allowed: "
                              f"{', '.join(DEVICES)}")
        if self.threads < 0:
            raise ConfigError(f"{THREADS_ENV}: must be >= 0, got {self.threads}")
        if self.vector not in VECTOR_MODES:
            raise ConfigError(f"{VECTOR_ENV}: unknown mode {self.vector!r}; allowed: "
                              f"{', '.join(VECTOR_MODES)}")
        if self.wait not in WAIT_MODES:
            raise ConfigError(f"{WAIT_ENV}: unknown mode {self.wait!r}; allowed: "
                              f"{', '.join(WAIT_MODES)}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Runtime:
        """The runtime the environment variables ask for; a bad value is a ConfigError."""
        env = os.environ if environ is None else environ
        if FAST_ENV in env:
            raise ConfigError(f"{FAST_ENV}: retired, the update has one path (the same bytes as "
                              f"the former default); remove the setting")
        device = env.get(DEVICE_ENV, "auto").strip().lower() or "auto"
        raw_threads = env.get(THREADS_ENV, "0").strip() or "0"
        try:
            threads = int(raw_threads)
        except ValueError:
            raise ConfigError(f"{THREADS_ENV}: expected an integer >= 0, got {raw_threads!r}") from None
        vector = env.get(VECTOR_ENV, "auto").strip().lower() or "auto"
        wait = env.get(WAIT_ENV, "block").strip().lower() or "block"
        return cls(device=device, threads=threads, graph=_switch(env, GRAPH_ENV), vector=vector,
                   wait=wait)

    def torch_device(self) -> torch.device:
        """The torch device; ``cuda`` without a visible GPU is a ConfigError."""
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"{DEVICE_ENV}: 'cuda' asked for but torch sees no CUDA device "
                              "(CPU-only torch build or no GPU); allowed here: auto, cpu")
        return torch.device(self.device)

    def vector_mode(self, num_tasks: int) -> str:
        """``sync`` or ``async`` for ``num_tasks`` environments (``auto``: see the module)."""
        if self.vector != "auto":
            return self.vector
        spare = len(os.sched_getaffinity(0)) > num_tasks
        return "async" if num_tasks > 1 and spare else "sync"

    def eval_workers(self, num_tasks: int) -> int:
        """Processes an evaluation of ``num_tasks`` tasks each on its own may use: one per core
        this process may use, at most one per task; 1 (this process) under ``sync``."""
        if self.vector == "sync":
            return 1
        return max(1, min(num_tasks, len(os.sched_getaffinity(0))))

    def update_path(self, device: torch.device) -> str:
        """How the update runs on ``device``: ``host`` (CPU: batches drawn on the host),
        ``captured`` (CUDA graph) or ``static`` (CUDA, ``PTSL_GRAPH=0``)."""
        if device.type != "cuda":
            return "host"
        return "captured" if self.graph else "static"

    def apply(self) -> None:
        """Set this process up to compute: torch's intra-op thread count when one is asked for,
        the C allocator's reuse of freed memory (:func:`keep_freed_memory`) and, on CUDA, full
        FP32 matrix products (:func:`full_fp32`)."""
        if self.threads:
            torch.set_num_threads(self.threads)
        keep_freed_memory()
        if self.torch_device().type == "cuda":
            full_fp32()

    def describe(self) -> dict[str, str]:
        """What a run's record carries about how it computed (MLflow tags, benchmark)."""
        device = self.torch_device()
        return {"torch_device": str(device), "update_path": self.update_path(device),
                "torch_threads": str(torch.get_num_threads()),
                **({"cuda_wait": self.wait} if device.type == "cuda" else {}), **precision()}


def full_fp32() -> None:
    """Float32 matrix products in full FP32 (torch's default, which a library may have changed):
    at these shapes TF32 is no faster on an H100, and it changes every number. The cuBLAS
    override variable wins over this setting, so it gets a warning line."""
    torch.set_float32_matmul_precision("highest")
    if os.environ.get(TF32_OVERRIDE_ENV, "0").strip() not in ("", "0"):
        print(f"warning: {TF32_OVERRIDE_ENV}={os.environ[TF32_OVERRIDE_ENV]} makes cuBLAS compute "
              "float32 products in TF32 whatever torch's setting; unset it for full FP32",
              file=sys.stderr)


def precision() -> dict[str, str]:
    """The float32 precision settings this process computes with."""
    return {"matmul_precision": torch.get_float32_matmul_precision(),
            "tf32_cublas": str(torch.backends.cuda.matmul.allow_tf32),
            "tf32_cudnn": str(torch.backends.cudnn.allow_tf32),
            "tf32_cublas_override": os.environ.get(TF32_OVERRIDE_ENV, "unset")}


def _switch(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "1").strip().lower() or "1"
    if raw not in _SWITCH:
        raise ConfigError(f"{name}: expected 1 or 0, got {raw!r}")
    return _SWITCH[raw]


#: glibc ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> bool:
    """Let glibc's malloc reuse freed activation buffers instead of returning them to the kernel.

    A paper-size update allocates and frees about a hundred 2 MB activations. By default glibc
    serves blocks that large with fresh ``mmap`` pages, which the kernel zero-fills on first
    touch, and trims the heap top back after frees: about 3% of the update's time on one core.
    Raising the mmap threshold to its maximum (32 MiB) and the trim threshold to 1 GiB keeps
    those blocks in the heap for the next update. Only where memory comes from; every number
    computed is the same. Returns whether it applied (glibc only).
    """
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)) and \
        bool(libc.mallopt(_M_TRIM_THRESHOLD, 1024 * 1024 * 1024))
