"""The captured update on a real GPU (skipped where torch sees no CUDA device; run them with
`make test-cuda`): captured == eager bit for bit after many updates for every method, a resume
from a checkpoint, the divergence guard, and the static selections against the former ones on
CUDA. Everything around the CUDA backend is tested on CPU (test_update_step.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from ptsl.core.buffer import DeviceReplayBuffer
from ptsl.core.builders import build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.cuda_graph import CudaBackend
from ptsl.core.errors import TrainingDiverged
from ptsl.core.loop import train
from ptsl.core.nets.task_index import gather_task, select_task_rows
from ptsl.core.runtime import Runtime
from ptsl.core.update_step import LOSS_NAMES, CapturedStep, DeviceSampler, UpdateStep

from ..helpers import assert_same_training_state
from .test_fast_path import METHODS, NAMES, SHAPES, _cfg
from .test_update_step import _transitions

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
CUDA = torch.device("cuda")
UPDATES = 100


def _setup(name: str):
    agent = build_agent(_cfg(METHODS[name]), SHAPES, NAMES, device=CUDA, capturable=True)
    buf = DeviceReplayBuffer(2000, SHAPES.obs_dim, SHAPES.action_dim, CUDA, seed=5)
    buf.add(*_transitions(n=1500))
    step = UpdateStep(agent, buf, 48, DeviceSampler(buf, buf.generator))
    return agent, buf, step


def _captured(agent, buf, step) -> CapturedStep:
    return CapturedStep(step, CudaBackend(CUDA), (agent.generator, buf.generator),
                        lambda: (agent.state_version, buf.state_version))


@pytest.mark.parametrize("name", list(METHODS))
def test_captured_equals_eager_bit_for_bit(name):
    agent, buf, step = _setup(name)
    ref_agent, _, ref_step = _setup(name)
    captured = _captured(agent, buf, step)
    history, ref_history = [], []
    for _ in range(UPDATES):
        captured()
        history.append(captured.losses())
        ref_step()
        ref_history.append(ref_step.losses())
    torch.cuda.synchronize()
    assert captured.captures == 1
    for got, want in zip(history, ref_history):
        assert all(torch.equal(got[k], want[k]) for k in LOSS_NAMES)
    _same_state(ref_agent, agent)


def test_resume_recaptures_and_matches_an_uninterrupted_run():
    agent, buf, step = _setup("care_ptsl")
    captured = _captured(agent, buf, step)
    for _ in range(20):
        captured()
    saved = copy.deepcopy({"agent": agent.training_state(), "buffer": buf.state_dict()})
    for _ in range(20):
        captured()
    other, other_buf, other_step = _setup("care_ptsl")
    other.load_training_state(saved["agent"])
    other_buf.load_state_dict(saved["buffer"])
    resumed = _captured(other, other_buf, other_step)
    for _ in range(20):
        resumed()
    torch.cuda.synchronize()
    _same_state(agent, other)


def test_the_divergence_guard_still_names_the_step(task_cache, monkeypatch):
    monkeypatch.setenv("PTSL_FAULT", "nan_reward@30")
    cfg = RunConfig(name="tiny", seed=1,
                    experiment=ExperimentConfig(benchmark="reach-v3", method="mtsac",
                                                hidden_dim=32, num_layers=2),
                    env=EnvConfig(episode_length=20), sac=SACConfig(batch_size=32, init_steps=20),
                    train=TrainConfig(steps=80, eval_every=40, checkpoint_every=40))
    with pytest.raises(TrainingDiverged, match=r"step \d+"):
        train(cfg, task_cache=task_cache, progress=False, runtime=Runtime(device="cuda"))


def test_static_selections_on_cuda():
    task = torch.randint(0, 10, (1280,), device=CUDA)
    per_task = torch.randn(1280, 10, 50, device=CUDA, requires_grad=True)
    rows = torch.arange(1280, device=CUDA)
    up = torch.randn(1280, 50, device=CUDA)
    (g_old,) = torch.autograd.grad(per_task[rows, task], per_task, up)
    (g_new,) = torch.autograd.grad(gather_task(per_task, task), per_task, up)
    assert torch.equal(g_new, g_old)
    table = torch.randn(10, 50, device=CUDA, requires_grad=True)
    (g_static,) = torch.autograd.grad(select_task_rows(table, task, True), table, up)
    (g_index,) = torch.autograd.grad(table[task], table, up)
    torch.testing.assert_close(g_static, g_index, rtol=1e-5, atol=1e-5)
    # Deterministic: the same bits twice.
    (again,) = torch.autograd.grad(select_task_rows(table, task, True), table, up)
    assert torch.equal(again, g_static)


def _same_state(a, b) -> None:
    assert_same_training_state(a.training_state(), b.training_state())
