"""The task selections with static shapes (the GPU path, :mod:`ptsl.core.cuda.task_index`)
against the CPU ones and the former ``y_all[rows, task]`` form: values bit for bit, gradients
bit for bit where the formulation allows and to float rounding where it sums in another order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptsl.core.agent.nets.task_index import TaskIndex
from ptsl.core.cuda.task_index import StaticTaskIndex, gather_task

B, T = 1280, 10


def _task(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, T, (B,), generator=torch.Generator().manual_seed(seed))


def _grads(fn, *inputs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    out.backward(upstream)
    return out.detach(), [x.grad for x in leaves]


@pytest.mark.parametrize("d", [1, 50, 400])
def test_static_row_selection_equals_index_select(d):
    table, task = torch.randn(T, d), _task()
    y_cpu, (g_cpu,) = _grads(lambda t: TaskIndex(task, T).rows(t), table)
    y_static, (g_static,) = _grads(lambda t: StaticTaskIndex(task, T).rows(t), table)
    assert torch.equal(y_static, y_cpu)
    assert torch.equal(y_static, table[task])
    # Each task's gradient is a sum over its rows, in another order: equal to rounding.
    torch.testing.assert_close(g_static, g_cpu, rtol=1e-5, atol=1e-5)


def test_static_entries_equal_the_cpu_ones():
    vector, task = torch.randn(T), _task(3)
    y_cpu, (g_cpu,) = _grads(lambda v: TaskIndex(task, T).entries(v), vector)
    y_static, (g_static,) = _grads(lambda v: StaticTaskIndex(task, T).entries(v), vector)
    assert y_cpu.shape == (B, 1) and torch.equal(y_static, y_cpu)
    torch.testing.assert_close(g_static, g_cpu, rtol=1e-5, atol=1e-5)


def test_gather_is_the_former_advanced_indexing_bit_for_bit():
    per_task, task = torch.randn(B, T, 50), _task(1)
    rows = torch.arange(B)
    y_old, (g_old,) = _grads(lambda p: p[rows, task], per_task)
    y_new, (g_new,) = _grads(lambda p: gather_task(p, task), per_task)
    assert torch.equal(y_new, y_old) and torch.equal(g_new, g_old)


@pytest.mark.parametrize("p_in,p_out", [(50, 50), (50, 326), (326, 50)])
def test_static_task_layer_equals_the_grouped_one(p_in, p_out):
    z, w, b, task = torch.randn(B, p_in), torch.randn(T, p_in, p_out), torch.randn(T, p_out), _task(2)
    y_g, g_g = _grads(lambda *a: TaskIndex(task, T).layer(*a), z, w, b)
    y_s, g_s = _grads(lambda *a: StaticTaskIndex(task, T).layer(*a), z, w, b)
    torch.testing.assert_close(y_s, y_g, rtol=1e-5, atol=1e-4)
    for got, want in zip(g_s, g_g):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("p_in,p_out", [(16, 16), (50, 50), (50, 326), (400, 8)])
@pytest.mark.parametrize("batch", [10, 32, 64, 80, 128, 1280])
def test_task_layer_bits_do_not_depend_on_the_thread_count(p_in, p_out, batch):
    """The batched task layer (one product over a (T, m, P_in) block) at the study's, the paper's
    and the multi-head sizes, values and every gradient, with 1, 2 and 4 threads."""
    g = torch.Generator().manual_seed(batch + p_in)
    task = torch.randint(0, T, (batch,), generator=g)
    z, w, b = torch.randn(batch, p_in, generator=g), torch.randn(T, p_in, p_out, generator=g), \
        torch.randn(T, p_out, generator=g)
    before = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            runs.append(_grads(lambda *a: TaskIndex(task, T).layer(*a), z, w, b))
    finally:
        torch.set_num_threads(before)
    (y1, g1), *others = runs
    for y, grads in others:
        assert torch.equal(y, y1)
        assert all(torch.equal(a, c) for a, c in zip(grads, g1))


@pytest.mark.parametrize("exp", ["mt10_mtsac", "mt10_care", "mt10_softmod"])
def test_the_methods_without_task_layers_never_call_one(exp, monkeypatch):
    """MT-SAC, CARE and Soft Modularization (the study's rows without PTSL) update and act
    without TaskIndex.layer: a change of that function leaves their runs' bytes as they are."""
    from ptsl.core.benchmarks import benchmark_tasks
    from ptsl.core.agent.builders import Shapes, build_agent
    from ptsl.ops.params import load_params, run_config
    from ptsl.tools.bench.updates import random_buffer

    from ..conftest import ROOT

    def refuse(*args, **kwargs):
        raise AssertionError("TaskIndex.layer called")

    monkeypatch.setattr(TaskIndex, "layer", refuse)
    cfg = run_config(load_params(ROOT / "studies" / "mt10-cpu" / "params.yaml"), exp, 1)
    agent = build_agent(cfg, Shapes(39, 4, T), list(benchmark_tasks("mt10")), torch.device("cpu"))
    buffer = random_buffer(T)
    rng = np.random.default_rng(0)
    agent.update(buffer.sample(32, rng, agent.device))
    agent.act(np.zeros((T, 39), np.float32), np.arange(T), deterministic=False)
