"""Scenarios of the GPU path shared by its CPU tests (tests/unit/test_gpu_path.py, with stand-in
capture backends) and its CUDA tests (tests/unit/test_cuda.py, with the real one).

Each scenario runs a captured side against an eager side fed the same transitions and checks
them equal bit for bit; it raises AssertionError on the first difference. The broken stand-ins
below imitate what a wrong capture does on a GPU, so the CPU tests show that each scenario
catches it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.config import RunConfig
from ptsl.core.cuda import DeviceUpdate, accelerate
from ptsl.core.cuda.buffer import DeviceReplayBuffer
from ptsl.core.cuda.step import LOSS_NAMES, WARMUP_UPDATES

from ..helpers import assert_same_training_state

CAPACITY = 4000


def transitions(n: int, seed: int, shapes: Shapes) -> tuple[np.ndarray, ...]:
    """``n`` random transitions of ``shapes``, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    o, a = shapes.obs_dim, shapes.action_dim
    return (rng.normal(size=(n, o)).astype(np.float32),
            rng.uniform(-1, 1, size=(n, a)).astype(np.float32), rng.normal(size=n),
            rng.normal(size=(n, o)).astype(np.float32), (rng.random(n) > 0.1).astype(np.float32),
            rng.integers(0, shapes.num_tasks, size=n))


@dataclass
class Side:
    """One agent on the GPU path: its buffer and its update."""

    agent: object
    buffer: DeviceReplayBuffer
    update: DeviceUpdate


def side(cfg: RunConfig, shapes: Shapes, names: tuple[str, ...], device: str | torch.device,
         graph: bool, backend=None, buffer_seed: int = 5) -> Side:
    """An agent of ``cfg`` set up for the GPU path on ``device`` (``backend`` replaces CUDA's)."""
    cfg = cfg.model_copy(update={"sac": cfg.sac.model_copy(update={"buffer_capacity": CAPACITY})})
    agent = build_agent(cfg, shapes, names, device=device)
    buffer, update = accelerate(agent, cfg.sac, shapes.obs_dim, shapes.action_dim,
                                seed=buffer_seed, graph=graph, backend=backend)
    return Side(agent, buffer, update)


def _same_losses(a: dict, b: dict, where: str) -> None:
    for k in LOSS_NAMES:
        assert torch.equal(a[k], b[k]), f"{where}: {k} {float(a[k])!r} != {float(b[k])!r}"


def grow_act_and_update(cfg: RunConfig, shapes: Shapes, names: tuple[str, ...], device,
                        backend=None, updates: int = 12, rows: int = 64) -> Side:
    """Captured against eager while the buffer grows and the agent acts stochastically between
    updates (its generator is the one the graph draws from): every update's losses, every
    action and the final weights and Adam moments equal bit for bit. Returns the captured side.
    """
    captured = side(cfg, shapes, names, device, graph=True, backend=backend)
    eager = side(cfg, shapes, names, device, graph=False)
    obs = np.random.default_rng(99).normal(size=(shapes.num_tasks, shapes.obs_dim))
    tasks = np.arange(shapes.num_tasks)
    for s in (captured, eager):
        s.buffer.add(*transitions(200, 0, shapes))
    for i in range(updates):
        for s in (captured, eager):
            s.buffer.add(*transitions(rows, 1 + i, shapes))  # the buffer grows between replays
        acts = [s.agent.act(obs.astype(np.float32), tasks, deterministic=False)
                for s in (captured, eager)]
        np.testing.assert_array_equal(acts[0], acts[1], err_msg=f"actions before update {i}")
        _same_losses(captured.update(), eager.update(), f"update {i}")
    assert len(captured.buffer) == min(CAPACITY, 200 + updates * rows)  # it wraps when full
    assert_same_training_state(eager.agent.training_state(), captured.agent.training_state())
    runner = captured.update.runner
    assert runner.captures == 1 and runner.replays == updates - WARMUP_UPDATES  # it ran captured
    return captured


def resume_recaptures(cfg: RunConfig, shapes: Shapes, names: tuple[str, ...], device,
                      backend=None) -> Side:
    """A resume into a running captured update: the graph of the old state is dropped and the
    update re-captured, continuing exactly as an eager agent loaded from the same checkpoint."""
    captured = side(cfg, shapes, names, device, graph=True, backend=backend)
    captured.buffer.add(*transitions(600, 0, shapes))
    for _ in range(6):
        captured.update()
    saved = copy.deepcopy({"agent": captured.agent.training_state(),
                           "buffer": captured.buffer.state_dict()})
    for _ in range(3):  # the state moves on; a graph of it would keep running after the load
        captured.update()
    eager = side(cfg, shapes, names, device, graph=False)
    for s in (captured, eager):
        s.agent.load_training_state(copy.deepcopy(saved["agent"]))
        s.buffer.load_state_dict(copy.deepcopy(saved["buffer"]))
    for i in range(6):
        _same_losses(captured.update(), eager.update(), f"update {i} after the resume")
    assert_same_training_state(eager.agent.training_state(), captured.agent.training_state())
    assert captured.update.runner.captures == 2, "the resume did not re-capture"
    return captured


class StandIn:
    """A capture backend on CPU: eager calls run the step, the 'graph' replays it by running it
    again. Records what the protocol asked for."""

    def __init__(self) -> None:
        self.eager_calls = 0
        self.captured: list[tuple] = []

    def eager(self, fn) -> None:
        self.eager_calls += 1
        fn()

    def capture(self, fn, generators):
        self.captured.append(tuple(generators))
        return SimpleNamespace(replay=fn)


class FrozenSizeStandIn(StandIn):
    """What a graph does when the sampler reads the buffer's size as a Python value: every
    replay samples from the rows present at capture."""

    def __init__(self, buffer_of) -> None:
        super().__init__()
        self.buffer_of = buffer_of

    def capture(self, fn, generators):
        size_t = self.buffer_of().size_t
        frozen = size_t.clone()

        def replay() -> None:
            now = size_t.clone()
            size_t.copy_(frozen)
            try:
                fn()
            finally:
                size_t.copy_(now)
        return SimpleNamespace(replay=replay)


class UnregisteredGeneratorStandIn(StandIn):
    """What a graph does with a generator that is not registered with it: every replay draws the
    random numbers it drew at capture."""

    def capture(self, fn, generators):
        states = [g.get_state() for g in generators]

        def replay() -> None:
            for g, state in zip(generators, states):
                g.set_state(state)
            fn()
        return SimpleNamespace(replay=replay)


class CapturingStandIn(StandIn):
    """A capture that refuses what a CUDA stream capture refuses (an operator whose output size
    needs a value read back to the host), and fails as torch's ``graph.__exit__`` does: a second
    error raised on top of the first. Scalar reads pass: on CPU, Adam reads its step counter on
    the host (capturable Adam keeps it on the device on CUDA); the meta-device test covers them.
    """

    HOST_READS = ("aten.bincount", "aten.nonzero")

    def capture(self, fn, generators):
        class Refuse(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if str(func).startswith(CapturingStandIn.HOST_READS):
                    raise RuntimeError(f"operation not permitted when stream is capturing "
                                       f"({func})\nCUDA kernel errors might be asynchronous")
                return func(*args, **(kwargs or {}))

        try:
            with Refuse():
                fn()
        except Exception:
            raise RuntimeError("operation failed due to a previous error during capture")
        return SimpleNamespace(replay=fn)
