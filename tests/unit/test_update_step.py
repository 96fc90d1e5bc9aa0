"""The static update step that a CUDA graph captures, checked on CPU: it is the eager update bit
for bit for every method, it makes no host read, its operations do not depend on the batch's
task mix, its tensors keep their addresses, the capture protocol (warm-up, one capture, replays,
re-capture after a resume) equals eager stepping, the loss history is not aliased, and the
sampler keeps drawing from the whole buffer as it grows. Only the CUDA backend's few lines are
left to the tests marked ``cuda``."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ptsl.core.buffer import DeviceReplayBuffer, ReplayBuffer
from ptsl.core.builders import build_agent
from ptsl.core.errors import GraphCaptureError
from ptsl.core.update_step import LOSS_NAMES, CapturedStep, DeviceSampler, HostSampler, UpdateStep

from ..helpers import assert_same_training_state
from .test_fast_path import METHODS, NAMES, SHAPES, _cfg

BATCH = 48
ROWS = 500


def _transitions(n: int = ROWS, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, 39)).astype(np.float32),
            rng.uniform(-1, 1, size=(n, 4)).astype(np.float32), rng.normal(size=n),
            rng.normal(size=(n, 39)).astype(np.float32), (rng.random(n) > 0.1).astype(np.float32),
            rng.integers(0, SHAPES.num_tasks, size=n))


def _buffers() -> tuple[ReplayBuffer, DeviceReplayBuffer]:
    host = ReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim)
    dev = DeviceReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim, "cpu", seed=5)
    rows = _transitions()
    host.add(*rows)
    dev.add(*rows)
    return host, dev


def _agent(name: str, static: bool):
    agent = build_agent(_cfg(METHODS[name]), SHAPES, NAMES)
    agent.set_static_shapes(static)
    return agent


@pytest.mark.parametrize("name", list(METHODS))
def test_the_step_is_the_eager_update_bit_for_bit(name):
    """With the static selections on both sides (what CUDA runs), host indices drawn as the CPU
    loop draws them give the same losses, weights and Adam moments as agent.update."""
    static = True
    eager, stepped = _agent(name, static), _agent(name, static)
    host, dev = _buffers()
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    step = UpdateStep(stepped, dev, BATCH, HostSampler(dev, rng_b))
    for s in range(5):
        expected = eager.update(host.sample(BATCH, rng_a), s)
        step()
        got = step.losses()
        for k in LOSS_NAMES:
            assert torch.equal(got[k], expected[k]), (s, k)
    _same_state(eager, stepped)
    fresh = _agent(name, static).state_dict()
    assert any(not torch.equal(fresh[k], v) for k, v in stepped.state_dict().items())


class _HostReads(TorchDispatchMode):
    """Records every operator with its argument shapes, and every read of a value to the host."""

    def __init__(self) -> None:
        super().__init__()
        self.trace: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        shapes = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args)
        self.trace.append((str(func), shapes))
        return func(*args, **(kwargs or {}))


def _static_step(name: str, task_of_rows: np.ndarray | None = None, seed: int = 0):
    agent = _agent(name, static=True)
    buf = DeviceReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim, "cpu", seed=5)
    rows = list(_transitions(seed=seed))
    if task_of_rows is not None:
        rows[5] = task_of_rows
    buf.add(*rows)
    return agent, buf, UpdateStep(agent, buf, BATCH, DeviceSampler(buf, buf.generator))


@pytest.mark.parametrize("name", list(METHODS))
def test_the_static_step_makes_no_host_read(name):
    """On the meta device a tensor has no value: .item(), .tolist(), bool() or a data-dependent
    shape (bincount, nonzero) raise. Two updates run through (the first allocates Adam's
    state); Adam's own CPU step counters are the one host value, which capturable Adam moves to
    the device on CUDA."""
    agent, buf, step = _static_step(name)
    agent.to("meta")
    agent.generator = None
    buf.data, buf.size_t = buf.data.to("meta"), buf.size_t.to("meta")
    meta = UpdateStep(agent, buf, BATCH, DeviceSampler(buf, None))
    meta()
    meta()
    assert meta.out.device.type == "meta"
    assert next(agent.parameters()).device.type == "meta"


@pytest.mark.parametrize("name", ["care_ptsl", "sac_ptsl", "softmod", "care"])
def test_the_static_steps_operations_do_not_depend_on_the_task_mix(name):
    """Two buffers, one with every task and one where task 0 never occurs: the same operators on
    the same shapes, in the same order (a captured graph replays one fixed sequence)."""
    traces = []
    for tasks in (np.arange(ROWS) % SHAPES.num_tasks, 1 + np.arange(ROWS) % 3):
        _, _, step = _static_step(name, task_of_rows=tasks)
        step()  # Adam's first step allocates its state: compare a later one
        with _HostReads() as mode:
            step()
        traces.append(mode.trace)
    assert traces[0] == traces[1]
    # The CPU selection does depend on it (grouped PTSL layers): the comparison can fail.
    if name in ("care_ptsl", "sac_ptsl"):
        grouped = []
        for tasks in (np.arange(ROWS) % SHAPES.num_tasks, 1 + np.arange(ROWS) % 3):
            agent, buf, step = _static_step(name, task_of_rows=tasks)
            agent.set_static_shapes(False)
            step()
            with _HostReads() as mode:
                step()
            grouped.append(mode.trace)
        assert grouped[0] != grouped[1]


def test_the_steps_tensors_keep_their_addresses():
    agent, buf, step = _static_step("care_ptsl")
    step()

    def addresses() -> list[int]:
        opt_state = [v.data_ptr() for o in (agent.actor_opt, agent.critic_opt, agent.alpha_opt,
                                             agent.task_encoder_opt)
                     for s in o.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        mine = [step.idx, step.rows, step.out, buf.data, buf.size_t,
                *(getattr(step.batch, f) for f in ("obs", "action", "reward", "next_obs",
                                                   "not_done", "task"))]
        return [p.data_ptr() for p in agent.parameters()] + opt_state + \
            [t.data_ptr() for t in mine]

    before = addresses()
    for _ in range(3):
        step()
        buf.add(*_transitions(n=10, seed=9))
    assert addresses() == before


class _StandIn:
    """A backend that runs the step where CUDA would capture it: eager calls run it, and the
    'graph' replays it. Records what the protocol asked for."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.eager_calls = 0
        self.captured: list[tuple] = []
        self.fail = fail

    def eager(self, fn) -> None:
        self.eager_calls += 1
        fn()

    def capture(self, fn, generators):
        if self.fail:
            raise self.fail
        self.captured.append(tuple(generators))
        return SimpleNamespace(replay=fn)


def _captured(name: str = "care_ptsl", backend=None):
    agent, buf, step = _static_step(name)
    backend = backend or _StandIn()
    return agent, buf, CapturedStep(step, backend, (agent.generator, buf.generator),
                                    lambda: (agent.state_version, buf.state_version)), backend


def test_the_capture_protocol_equals_eager_stepping():
    agent, buf, captured, backend = _captured()
    ref_agent, ref_buf, ref_step = _static_step("care_ptsl")
    history, ref_history = [], []
    for _ in range(8):
        captured()
        history.append(captured.losses())
        ref_step()
        ref_history.append(ref_step.losses())
    assert backend.eager_calls == 3 and captured.captures == 1
    assert backend.captured == [(agent.generator, buf.generator)]
    for got, want in zip(history, ref_history):  # one update per call, warm-up included
        assert all(torch.equal(got[k], want[k]) for k in LOSS_NAMES)
    _same_state(ref_agent, agent)


def test_a_resume_recaptures_and_continues_like_eager_stepping():
    agent, buf, captured, backend = _captured()
    for _ in range(5):
        captured()
    saved = copy.deepcopy({"agent": agent.training_state(), "buffer": buf.state_dict()})
    ref_agent, ref_buf, ref_step = _static_step("care_ptsl")
    ref_agent.load_training_state(copy.deepcopy(saved["agent"]))
    ref_buf.load_state_dict(copy.deepcopy(saved["buffer"]))
    for _ in range(2):  # a graph of the old state would keep running: the resume must drop it
        captured()
    agent.load_training_state(saved["agent"])
    buf.load_state_dict(saved["buffer"])
    for _ in range(6):
        captured()
        ref_step()
    assert captured.captures == 2 and backend.eager_calls == 6
    _same_state(ref_agent, agent)


def test_a_failed_capture_names_the_cause_and_the_switch():
    *_, captured, _ = _captured(backend=_StandIn(fail=RuntimeError(
        "operation not permitted when stream is capturing\nmore detail")))
    for _ in range(3):
        captured()
    with pytest.raises(GraphCaptureError) as err:
        captured()
    msg = str(err.value)
    assert "\n" not in msg and "RuntimeError: operation not permitted" in msg
    assert "PTSL_GRAPH=0" in msg


def test_loss_history_entries_are_not_aliased():
    *_, captured, _ = _captured()
    history = []
    for _ in range(6):
        captured()
        history.append(captured.losses())
    first = {k: v.clone() for k, v in history[0].items()}
    assert all(torch.equal(history[0][k], first[k]) for k in LOSS_NAMES)
    assert not torch.equal(history[-1]["critic_loss"], history[0]["critic_loss"])


def test_the_device_sampler_draws_from_the_whole_growing_buffer():
    buf = DeviceReplayBuffer(10_000, SHAPES.obs_dim, SHAPES.action_dim, "cpu", seed=3)
    buf.add(*_transitions(n=20))
    sampler = DeviceSampler(buf, torch.Generator().manual_seed(0))
    idx = torch.zeros(4096, dtype=torch.int64)
    sampler.draw(idx)
    assert 0 <= int(idx.min()) and int(idx.max()) < 20
    for _ in range(3):  # the same sampler object, as a captured graph would keep it
        buf.add(*_transitions(n=ROWS))
    sampler.draw(idx)
    assert int(idx.max()) < len(buf) == 20 + 3 * ROWS and int(idx.max()) >= 1000
    # Seeded: the same generator seed gives the same indices.
    a, b = torch.zeros(64, dtype=torch.int64), torch.zeros(64, dtype=torch.int64)
    DeviceSampler(buf, torch.Generator().manual_seed(7)).draw(a)
    DeviceSampler(buf, torch.Generator().manual_seed(7)).draw(b)
    assert torch.equal(a, b)


def _same_state(a, b) -> None:
    assert_same_training_state(a.training_state(), b.training_state())
