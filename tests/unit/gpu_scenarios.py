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
from ptsl.core.cuda import DeviceUpdate, accelerate, group_update
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


def _seed_sides(cfg: RunConfig, seeds: list[int], shapes: Shapes, names, device) -> list[Side]:
    return [side(cfg.model_copy(update={"seed": seed}), shapes, names, device, graph=False,
                 buffer_seed=100 + seed) for seed in seeds]


def _close_state(want: dict, got: dict, atol: float, where: str) -> None:
    for key, value in want["model"].items():
        diff = (got["model"][key].double() - value.double()).abs().max().item()
        assert diff <= atol, f"{where}: weight {key} differs by {diff:.3g} (> {atol:g})"


def group_updates(cfg: RunConfig, seeds: list[int], shapes: Shapes, names, device,
                  backend=None, updates: int = 8, rows: int = 64,
                  atol: float | None = None) -> None:
    """A seed group's update, captured through ``backend`` (CUDA's when None), against the same
    group's update eager and against each seed's own update, all fed the same transitions while
    the buffers grow and the agents act between updates. The captured group equals the eager
    group bit for bit (every seed's losses, actions, weights and Adam moments); each seed's own
    update equals the group's bit for bit when ``atol`` is None, else its weights agree within
    ``atol`` (a method whose batched contractions sum in another order)."""
    sides = {"captured": _seed_sides(cfg, seeds, shapes, names, device),
             "eager": _seed_sides(cfg, seeds, shapes, names, device),
             "alone": _seed_sides(cfg, seeds, shapes, names, device)}
    captured = group_update([s.update for s in sides["captured"]], graph=True, backend=backend)
    eager = group_update([s.update for s in sides["eager"]], graph=False)
    assert captured.step.group.batched and eager.step.group.batched, "the group did not batch"
    obs = np.random.default_rng(99).normal(size=(shapes.num_tasks, shapes.obs_dim))
    tasks = np.arange(shapes.num_tasks)
    for group in sides.values():
        for k, s in enumerate(group):
            s.buffer.add(*transitions(200, 50 * k, shapes))
    for i in range(updates):
        acts = {}
        for name, group in sides.items():
            for k, s in enumerate(group):
                s.buffer.add(*transitions(rows, 1000 * k + i, shapes))
            acts[name] = [s.agent.act(obs.astype(np.float32), tasks, deterministic=False)
                          for s in group]
        for a, b in zip(acts["captured"], acts["eager"]):
            np.testing.assert_array_equal(a, b, err_msg=f"actions before update {i}")
        got, want = captured(), eager()
        alone = [s.update() for s in sides["alone"]]
        for k, (g, w, own) in enumerate(zip(got, want, alone)):
            _same_losses(g, w, f"update {i}, seed {seeds[k]}, captured group against eager")
            if atol is None:
                _same_losses(own, g, f"update {i}, seed {seeds[k]}, alone against the group")
    for k, seed in enumerate(seeds):
        state = {n: sides[n][k].agent.training_state() for n in sides}
        assert_same_training_state(state["eager"], state["captured"])
        if atol is None:
            assert_same_training_state(state["alone"], state["captured"])
        else:
            _close_state(state["alone"], state["captured"], atol, f"seed {seed}")
    runner = captured.runner
    assert runner.captures == 1 and runner.replays == updates - WARMUP_UPDATES


# ---------------------------------------------------------------------------------- stand-ins


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


def group_acts(cfg: RunConfig, seeds: list[int], shapes: Shapes, names, device,
               atol: float | None = None) -> None:
    """A seed group's actions on the device path (static task selections) against each seed's
    own ``act``: deterministic and stochastic, three calls; equal bit for bit when ``atol`` is
    None, else within ``atol``; every seed's generator where its own acting leaves it."""
    from ptsl.core.agent.group import SeedGroup
    from ptsl.core.cuda.task_index import StaticTaskIndex

    def agents():
        out = []
        for seed in seeds:
            agent = build_agent(cfg.model_copy(update={"seed": seed}), shapes, names,
                                device=device)
            agent.task_index = StaticTaskIndex
            out.append(agent)
        return out

    alone, group = agents(), SeedGroup(agents())
    rng = np.random.default_rng(7)
    tasks = [np.arange(shapes.num_tasks)] * len(seeds)
    for deterministic in (True, False, False):
        obs = [rng.normal(size=(shapes.num_tasks, shapes.obs_dim)).astype(np.float32)
               for _ in seeds]
        own = [a.act(o, t, deterministic) for a, o, t in zip(alone, obs, tasks)]
        for seed, mine, theirs in zip(seeds, own, group.act(obs, tasks, deterministic)):
            if atol is None:
                np.testing.assert_array_equal(theirs, mine, err_msg=f"seed {seed}")
            else:
                np.testing.assert_allclose(theirs, mine, rtol=0, atol=atol, err_msg=f"seed {seed}")
    for a, b in zip(alone, group.agents):
        assert torch.equal(a.generator.get_state(), b.generator.get_state())
