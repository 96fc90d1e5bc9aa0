"""The GPU path (:mod:`ptsl.core.cuda`), checked on CPU: the static step is the update bit for bit
for every method, it makes no host read, its operations do not depend on the batch's task mix,
its tensors keep their addresses; the capture protocol (warm-up, one capture, replays,
re-capture after a resume) equals eager stepping while the buffer grows and the agent acts
between replays, and each of those checks catches a deliberately broken capture; a failed
capture names its cause; the loss history is not aliased; the sampler keeps drawing from the
whole buffer as it grows. Only :mod:`ptsl.core.cuda.graph` is left to the tests marked
``cuda`` (tests/unit/test_cuda.py), which run the same scenarios on a GPU."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ptsl.core.agent.buffer import ReplayBuffer
from ptsl.core.agent.builders import build_agent
from ptsl.core.agent.nets.task_index import TaskIndex
from ptsl.core.cuda.buffer import DeviceReplayBuffer, DeviceSampler
from ptsl.core.cuda.step import LOSS_NAMES, CapturedStep, UpdateStep
from ptsl.core.cuda.task_index import StaticTaskIndex
from ptsl.core.errors import GraphCaptureError

from ..helpers import assert_same_training_state
from . import gpu_scenarios as scenarios
from .gpu_scenarios import (CapturingStandIn, FrozenSizeStandIn, StandIn,
                            UnregisteredGeneratorStandIn)
from .variants import METHODS, NAMES, SHAPES, variant_cfg

BATCH = 48
ROWS = 500


def _transitions(n: int = ROWS, seed: int = 0) -> tuple[np.ndarray, ...]:
    return scenarios.transitions(n, seed, SHAPES)


def _buffers() -> tuple[ReplayBuffer, DeviceReplayBuffer]:
    host = ReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim)
    dev = DeviceReplayBuffer(1000, SHAPES.obs_dim, SHAPES.action_dim, "cpu", seed=5)
    rows = _transitions()
    host.add(*rows)
    dev.add(*rows)
    return host, dev


class HostSampler:
    """Indices from a numpy generator, drawn as :meth:`ReplayBuffer.sample` draws them: a step
    fed by it takes the same batches as the CPU training loop."""

    def __init__(self, buffer: DeviceReplayBuffer, rng: np.random.Generator) -> None:
        self.buffer, self.rng = buffer, rng

    def draw(self, idx: torch.Tensor) -> None:
        idx.copy_(torch.from_numpy(self.rng.integers(0, len(self.buffer), size=idx.shape[0])))


def _agent(name: str, static: bool):
    agent = build_agent(variant_cfg(METHODS[name]), SHAPES, NAMES)
    agent.task_index = StaticTaskIndex if static else TaskIndex
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
        expected = eager.update(host.sample(BATCH, rng_a))
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


@pytest.mark.parametrize("name", ["care_ptsl", "sac_ptsl", "softmod", "care", "mhsac", "moore",
                                  "paco"])
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
    # The CPU selection does depend on it (grouped task layers): the comparison can fail.
    if name in ("care_ptsl", "sac_ptsl", "mhsac", "moore"):
        grouped = []
        for tasks in (np.arange(ROWS) % SHAPES.num_tasks, 1 + np.arange(ROWS) % 3):
            agent, buf, step = _static_step(name, task_of_rows=tasks)
            agent.task_index = TaskIndex
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


def _captured(name: str = "care_ptsl", backend=None):
    agent, buf, step = _static_step(name)
    backend = backend or StandIn()
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
    assert backend.eager_calls == 3 and captured.captures == 1 and captured.replays == 5
    assert backend.captured == [(agent.generator, buf.generator)]
    for got, want in zip(history, ref_history):  # one update per call, warm-up included
        assert all(torch.equal(got[k], want[k]) for k in LOSS_NAMES)
    _same_state(ref_agent, agent)


@pytest.mark.parametrize("name", ["mtsac", "care_ptsl", "softmod", "moore"])
def test_captured_equals_eager_while_the_buffer_grows_and_the_agent_acts(name):
    scenarios.grow_act_and_update(variant_cfg(METHODS[name]), SHAPES, NAMES, "cpu", StandIn())


@pytest.mark.parametrize("broken", ["frozen size", "unregistered generator"])
def test_the_growing_buffer_scenario_catches_a_broken_capture(broken, monkeypatch):
    """What a wrong capture does on a GPU, imitated on CPU: the scenario above fails."""
    holder: dict = {}
    backend = (FrozenSizeStandIn(lambda: holder["buffer"]) if broken == "frozen size"
               else UnregisteredGeneratorStandIn())
    real_side = scenarios.side

    def side(*args, **kwargs):
        made = real_side(*args, **kwargs)
        holder.setdefault("buffer", made.buffer)  # the captured side is made first
        return made

    monkeypatch.setattr(scenarios, "side", side)
    with pytest.raises(AssertionError, match="update"):
        scenarios.grow_act_and_update(variant_cfg(METHODS["mtsac"]), SHAPES, NAMES, "cpu",
                                      backend)


def test_a_resume_recaptures_and_continues_like_an_eager_resume():
    captured = scenarios.resume_recaptures(variant_cfg(METHODS["care_ptsl"]), SHAPES, NAMES,
                                           "cpu", StandIn())
    assert captured.update.runner.backend.eager_calls == 6


def test_the_resume_scenario_catches_a_capture_kept_across_a_load(monkeypatch):
    """A protocol that kept its graph after a resume (on a GPU it would keep updating the
    replaced Adam moments) fails the scenario."""
    monkeypatch.setattr(CapturedStep, "invalidate", lambda self: None)
    with pytest.raises(AssertionError, match="re-capture"):
        scenarios.resume_recaptures(variant_cfg(METHODS["mtsac"]), SHAPES, NAMES, "cpu",
                                    StandIn())


def test_a_failed_capture_names_the_first_error_its_place_and_the_switch():
    """torch raises a second error on top of the one that broke the capture; the message names
    the first, where in this package it happened, and PTSL_GRAPH=0. The host read here is the
    CPU task layer's group sizes, which the static formulation avoids."""
    agent, buf, step = _static_step("care_ptsl")
    agent.task_index = TaskIndex  # group sizes read on the host: no capture possible
    captured = CapturedStep(step, CapturingStandIn(), (agent.generator, buf.generator),
                            lambda: (agent.state_version, buf.state_version))
    for _ in range(3):
        captured()
    with pytest.raises(GraphCaptureError) as err:
        captured()
    msg = str(err.value)
    assert "\n" not in msg and "previous error" not in msg
    assert "RuntimeError: operation not permitted when stream is capturing (aten.bincount" in msg
    assert "at ptsl/core/agent/nets/task_index.py:" in msg and "(_counts)" in msg
    assert msg.endswith("set PTSL_GRAPH=0 to train without capture (the same numbers, eager)")
    # With the static selections, the same capture goes through.
    agent.task_index = StaticTaskIndex
    captured()
    assert captured.captures == 1


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
