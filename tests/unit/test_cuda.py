"""The GPU path on a real GPU (skipped where torch sees no CUDA device): the scenarios of
tests/unit/test_gpu_path.py with the CUDA backend (captured == eager bit for bit while the buffer
grows and the agent acts between replays; a resume re-captures), at the paper's sizes too; the
training loop with PTSL_GRAPH=1 against 0; GPU memory flat over replays; a failed capture names
its cause and leaves the current stream as it was; the divergence guard on a captured run; the
static selections on CUDA.

Run them with `make test-cuda`, or `pytest -m cuda tests/unit/test_cuda.py` (no pytest-xdist
needed).
"""

from __future__ import annotations

import pytest
import torch

from ptsl.core import faults
from ptsl.core.agent.builders import Shapes
from ptsl.core.agent.nets.task_index import TaskIndex
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.cuda.step import CapturedStep, WARMUP_UPDATES
from ptsl.core.cuda.task_index import StaticTaskIndex, gather_task
from ptsl.core.errors import GraphCaptureError, TrainingDiverged
from ptsl.core.log import NoLog
from ptsl.core.loop import Training, train
from ptsl.core.persistence import ResumeCheckpoints
from ptsl.core.runtime import Runtime

from ..helpers import assert_same_training_state
from . import gpu_scenarios as scenarios
from .variants import METHODS, NAMES, SHAPES, variant_cfg

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
CUDA = torch.device("cuda")


@pytest.mark.parametrize("name", list(METHODS))
def test_captured_equals_eager_while_the_buffer_grows_and_the_agent_acts(name):
    scenarios.grow_act_and_update(variant_cfg(METHODS[name]), SHAPES, NAMES, CUDA, updates=60)


@pytest.mark.parametrize("experiment", ["mt10_mtsac", "mt10_care_ptsl"])
def test_captured_equals_eager_at_the_papers_sizes(experiment, raw_params):
    """The paper's networks (MT10, 10 tasks) at the paper's batch of 1280."""
    from ptsl.core.benchmarks import benchmark_tasks
    from ptsl.ops.params import parse_params, run_config

    cfg = run_config(parse_params(raw_params), experiment, 1)
    cfg = cfg.model_copy(update={"sac": cfg.sac.model_copy(update={"batch_size": 1280})})
    scenarios.grow_act_and_update(cfg, Shapes(39, 4, 10), benchmark_tasks("mt10"), CUDA,
                                  updates=20, rows=640)


def test_a_resume_recaptures_and_continues_like_an_eager_resume():
    scenarios.resume_recaptures(variant_cfg(METHODS["care_ptsl"]), SHAPES, NAMES, CUDA)


def test_gpu_memory_stays_flat_over_replays():
    """Replays reuse the graph's memory: after the capture, hundreds of updates (and the loss
    copies the loop takes) allocate nothing that stays."""
    s = scenarios.side(variant_cfg(METHODS["care_ptsl"]), SHAPES, NAMES, CUDA, graph=True)
    s.buffer.add(*scenarios.transitions(1000, 0, SHAPES))
    for _ in range(WARMUP_UPDATES + 5):
        s.update()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for i in range(300):
        losses = s.update()
        if i % 50 == 0:
            s.buffer.add(*scenarios.transitions(20, i, SHAPES))
    del losses
    torch.cuda.synchronize()
    assert s.update.runner.captures == 1 and s.update.runner.replays >= 300
    assert torch.cuda.memory_allocated() == before


def _tiny(steps: int = 80, method: str = "care_ptsl") -> RunConfig:
    extra = {"pal_dim": 8} if "ptsl" in method else {}
    return RunConfig(name="tiny", seed=1,
                     experiment=ExperimentConfig(benchmark="mt10", method=method, hidden_dim=32,
                                                 num_layers=2, **extra),
                     env=EnvConfig(episode_length=20), sac=SACConfig(batch_size=64, init_steps=20),
                     train=TrainConfig(steps=steps, eval_every=40, checkpoint_every=40))


def test_the_training_loop_captured_equals_eager(task_cache):
    """train() with PTSL_GRAPH=1 and 0: the same curve, weights and Adam moments, bit for bit."""
    runs = [train(_tiny(), task_cache=task_cache, progress=False,
                  runtime=Runtime(device="cuda", graph=graph, vector="sync"))
            for graph in (True, False)]
    captured, eager = runs
    assert captured.curve.to_csv() == eager.curve.to_csv()
    assert_same_training_state(eager.agent.training_state(), captured.agent.training_state())


def test_a_run_that_waits_asleep_equals_one_that_spins(task_cache):
    """PTSL_CUDA_WAIT=block and spin: the agent is told, and the curve and state are the same
    bit for bit (only when the host waits changes). A blocking read of work still queued on the
    device returns its finished values."""
    from ptsl.core.agent.sac import to_host

    runs = [train(_tiny(steps=80), task_cache=task_cache, progress=False,
                  runtime=Runtime(device="cuda", vector="sync", wait=wait))
            for wait in ("block", "spin")]
    assert [r.agent.blocking_wait for r in runs] == [True, False]
    assert runs[0].curve.to_csv() == runs[1].curve.to_csv()
    assert_same_training_state(runs[1].agent.training_state(), runs[0].agent.training_state())
    a = torch.randn(2048, 2048, device=CUDA)
    queued = a
    for _ in range(20):  # long enough to be still running when the read starts
        queued = torch.tanh(queued @ a)
    got = to_host(queued, blocking=True)
    torch.cuda.synchronize()
    assert got.device.type == "cpu" and torch.equal(got, queued.cpu())


def test_the_divergence_guard_names_the_step_of_a_captured_run(task_cache, monkeypatch):
    # faults reads PTSL_FAULT once, at import (a stage's process sets it before): read it again
    monkeypatch.setenv("PTSL_FAULT", "nan_reward@30")
    monkeypatch.setattr(faults, "_faults", faults.Faults.from_env())
    cfg = _tiny(method="mtsac")
    training = Training(cfg, Runtime(device="cuda", vector="sync"), task_cache,
                        ResumeCheckpoints(None, cfg), NoLog())
    with pytest.raises(TrainingDiverged, match=r"step \d+"):
        training.run(progress=False, on_eval=None, on_step=None)
    assert training.update_path == "captured"
    assert training.update.runner.captures == 1 and training.update.runner.replays > 0


def test_a_failed_capture_names_its_cause_and_restores_the_stream():
    """A host read inside the capture (the CPU task layer's group sizes) breaks it: the error
    names the first exception and where it happened, and the current stream is the one before
    the capture, so the run's next kernels go where they did."""
    s = scenarios.side(variant_cfg(METHODS["care_ptsl"]), SHAPES, NAMES, CUDA, graph=True)
    s.buffer.add(*scenarios.transitions(500, 0, SHAPES))
    for _ in range(WARMUP_UPDATES):
        s.update()
    s.agent.task_index = TaskIndex  # bincount(...).tolist(): not capturable
    before = torch.cuda.current_stream()
    with pytest.raises(GraphCaptureError, match="PTSL_GRAPH=0") as err:
        s.update()
    assert "previous error" not in str(err.value) and "ptsl/core/" in str(err.value)
    assert torch.cuda.current_stream() == before
    torch.ones(3, device=CUDA).sum().item()  # the device still works


def test_static_selections_on_cuda():
    task = torch.randint(0, 10, (1280,), device=CUDA)
    per_task = torch.randn(1280, 10, 50, device=CUDA, requires_grad=True)
    rows = torch.arange(1280, device=CUDA)
    up = torch.randn(1280, 50, device=CUDA)
    (g_old,) = torch.autograd.grad(per_task[rows, task], per_task, up)
    (g_new,) = torch.autograd.grad(gather_task(per_task, task), per_task, up)
    assert torch.equal(g_new, g_old)
    table = torch.randn(10, 50, device=CUDA, requires_grad=True)
    static = StaticTaskIndex(task, 10)
    (g_static,) = torch.autograd.grad(static.rows(table), table, up)
    (g_index,) = torch.autograd.grad(table[task], table, up)
    torch.testing.assert_close(g_static, g_index, rtol=1e-5, atol=1e-5)
    # Deterministic: the same bits twice.
    (again,) = torch.autograd.grad(static.rows(table), table, up)
    assert torch.equal(again, g_static)


def test_full_fp32_on_cuda():
    """A CUDA run computes float32 products in full FP32 whatever a library asked for before."""
    torch.set_float32_matmul_precision("high")
    try:
        Runtime(device="cuda").apply()
        assert torch.get_float32_matmul_precision() == "highest"
        assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.set_float32_matmul_precision("highest")


def test_captured_step_counts():
    """The protocol on CUDA: three eager warm-ups, one capture, then replays only."""
    s = scenarios.side(variant_cfg(METHODS["mtsac"]), SHAPES, NAMES, CUDA, graph=True)
    s.buffer.add(*scenarios.transitions(300, 0, SHAPES))
    for _ in range(10):
        s.update()
    runner: CapturedStep = s.update.runner
    assert (runner.eager_done, runner.captures, runner.replays) == (WARMUP_UPDATES, 1, 7)
