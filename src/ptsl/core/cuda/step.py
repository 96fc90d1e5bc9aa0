"""The SAC update as a static step, and the protocol that captures it as a CUDA graph.

A captured graph replays fixed kernels on fixed addresses, so the step has static input, index
and output tensors, makes no host read, and takes shapes that do not depend on the batch's task
mix (:class:`~ptsl.core.cuda.task_index.StaticTaskIndex`). Its maths is the agent's own
:meth:`~ptsl.core.agent.sac.MultiTaskSAC.update`: one copy of the update.

- :class:`UpdateStep`: draw indices, gather the rows into a static batch, update, write the
  five losses into a static (5,) tensor.
- :class:`CapturedStep`: the capture protocol (eager warm-up updates, one capture, replays,
  re-capture after a resume) over a backend; :mod:`ptsl.core.cuda.graph` is the CUDA one, and
  the tests run the protocol on CPU with a stand-in.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Protocol

import torch

from ..agent.buffer import Batch
from ..agent.sac import MultiTaskSAC
from ..errors import GraphCaptureError
from .buffer import DeviceReplayBuffer

LOSS_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha_mean", "entropy")
#: Eager updates before the capture: they allocate Adam's moments and the libraries' workspaces,
#: which a capture must find in place (and they are real updates, counted as such).
WARMUP_UPDATES = 3
#: The package's folder: a failed capture names the innermost frame inside it.
_PACKAGE = Path(__file__).resolve().parents[2]


class Sampler(Protocol):
    def draw(self, idx: torch.Tensor) -> None: ...


class UpdateStep:
    """One update of ``agent`` on ``batch_size`` rows of ``buffer`` with static tensors.

    Calling it fills :attr:`idx` (``sampler``), gathers the rows into :attr:`batch` (contiguous
    fields, as :meth:`ReplayBuffer.sample` gives them), runs the agent's update and writes the
    losses into :attr:`out` in :data:`LOSS_NAMES` order. Every tensor it owns keeps its address
    from call to call.
    """

    def __init__(self, agent: MultiTaskSAC, buffer: DeviceReplayBuffer, batch_size: int,
                 sampler: Sampler) -> None:
        self.agent, self.buffer, self.sampler = agent, buffer, sampler
        dev, b = buffer.data.device, batch_size
        self.idx = torch.zeros(b, dtype=torch.int64, device=dev)
        self.rows = torch.empty((b, buffer.data.shape[1]), device=dev)
        o, a = buffer.obs_dim, buffer.action_dim
        self.batch = Batch(obs=torch.empty((b, o), device=dev),
                           action=torch.empty((b, a), device=dev),
                           reward=torch.empty((b, 1), device=dev),
                           next_obs=torch.empty((b, o), device=dev),
                           not_done=torch.empty((b, 1), device=dev),
                           task=torch.zeros(b, dtype=torch.int64, device=dev))
        self.out = torch.empty(len(LOSS_NAMES), device=dev)

    def __call__(self) -> None:
        self.gather()
        self.write(self.agent.update(self.batch))

    def gather(self) -> None:
        """Draw the next indices and gather their rows into :attr:`batch`."""
        self.sampler.draw(self.idx)
        torch.index_select(self.buffer.data, 0, self.idx, out=self.rows)
        view = self.buffer.fields(self.rows)
        for f in fields(Batch):
            getattr(self.batch, f.name).copy_(getattr(view, f.name))

    def write(self, losses: dict[str, torch.Tensor]) -> None:
        """An update's losses into :attr:`out`."""
        torch.stack([losses[name] for name in LOSS_NAMES], out=self.out)

    def generators(self) -> tuple[torch.Generator, ...]:
        """The generators a step draws from (the sampler's and the agent's noise)."""
        return (self.agent.generator, self.buffer.generator)

    def versions(self) -> tuple[int, ...]:
        """Counters that change when the agent's or the buffer's state is loaded."""
        return (self.agent.state_version, self.buffer.state_version)

    def losses(self) -> dict[str, torch.Tensor]:
        """The last update's losses, copied out of :attr:`out` (the next update overwrites it;
        one copy kernel, no host read)."""
        return dict(zip(LOSS_NAMES, self.out.clone().unbind()))


class Graph(Protocol):
    def replay(self) -> None: ...


class Backend(Protocol):
    """How a :class:`CapturedStep` runs an eager step and captures one."""

    def eager(self, fn: Callable[[], None]) -> None: ...

    def capture(self, fn: Callable[[], None], generators: Sequence[torch.Generator]) -> Graph: ...


class CapturedStep:
    """``step`` run eagerly ``warmup`` times through ``backend``, then captured once and replayed.

    The capturing call replays the new graph once: capture records kernels without running them,
    so that replay is this call's update, and every call is exactly one update. When
    ``versions()`` changes (the agent's or the buffer's state was loaded, which replaces the
    optimizer moments and the generators' states), the graph is dropped and the protocol starts
    again: warm-up, capture.
    """

    def __init__(self, step: UpdateStep, backend: Backend,
                 generators: Sequence[torch.Generator],
                 versions: Callable[[], tuple[int, ...]], warmup: int = WARMUP_UPDATES) -> None:
        self.step, self.backend, self.generators = step, backend, tuple(generators)
        self.versions, self.warmup = versions, warmup
        self.graph: Graph | None = None
        self.eager_done = 0
        self.captures = 0
        self.replays = 0
        self._captured_at: tuple[int, ...] | None = None

    def __call__(self) -> None:
        if self.graph is not None and self.versions() != self._captured_at:
            self.invalidate()
        if self.graph is None and self.eager_done < self.warmup:
            self.backend.eager(self.step)
            self.eager_done += 1
            return
        if self.graph is None:
            try:
                self.graph = self.backend.capture(self.step, self.generators)
            except Exception as exc:  # any failure: name its cause, and the same advice
                raise capture_failure(exc) from exc
            self._captured_at = self.versions()
            self.captures += 1
        self.graph.replay()
        self.replays += 1

    def invalidate(self) -> None:
        """Drop the graph: the next calls warm up and capture again."""
        self.graph, self.eager_done, self._captured_at = None, 0, None

    def losses(self) -> dict[str, torch.Tensor]:
        """The last update's losses (see :meth:`UpdateStep.losses`)."""
        return self.step.losses()


def capture_failure(exc: BaseException) -> GraphCaptureError:
    """One line for a failed capture: the first exception of the chain (an op that breaks a
    capture raises inside the step, and torch's ``graph.__exit__`` then raises "operation failed
    due to a previous error during capture" on top of it), its first line, the innermost frame
    of this package it passed through, and the switch that trains without capture."""
    root, seen = exc, {id(exc)}
    while (cause := root.__cause__ or root.__context__) is not None and id(cause) not in seen:
        seen.add(id(cause))
        root = cause
    text = str(root).strip()
    first = text.splitlines()[0] if text else "no message"
    where = ""
    ours = [f for f in traceback.extract_tb(root.__traceback__)
            if Path(f.filename).resolve().is_relative_to(_PACKAGE)]
    if ours:
        frame = ours[-1]
        where = (f" at {Path(frame.filename).resolve().relative_to(_PACKAGE.parent)}:"
                 f"{frame.lineno} ({frame.name})")
    return GraphCaptureError(f"capturing the update as a CUDA graph failed: {type(root).__name__}:"
                             f" {first}{where}; set PTSL_GRAPH=0 to train without capture (the "
                             "same numbers, eager)")
