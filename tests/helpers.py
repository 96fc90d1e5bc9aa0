"""Small helpers shared by the network and update tests."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ptsl.core.agent.buffer import Batch
from ptsl.core.agent.nets.task_index import TaskIndex


def random_batch(n: int = 64, seed: int = 0, obs_dim: int = 12, num_tasks: int = 3) -> Batch:
    """A reproducible random batch whose rows cycle through ``num_tasks`` tasks."""
    g = torch.Generator().manual_seed(seed)
    return Batch(obs=torch.randn(n, obs_dim, generator=g),
                 action=torch.rand(n, 4, generator=g) * 2 - 1,
                 reward=torch.randn(n, 1, generator=g),
                 next_obs=torch.randn(n, obs_dim, generator=g),
                 not_done=torch.ones(n, 1), task=torch.arange(n) % num_tasks)


def param_ids(params) -> set[int]:
    """Identity set of parameters (to compare optimiser membership and tying)."""
    return {id(p) for p in params}


def assert_same_training_state(want: dict, got: dict) -> None:
    """Two agents' ``training_state()``: every weight and every Adam moment equal bit for bit
    (the next update of a resumed run starts from the same state)."""
    assert want["model"].keys() == got["model"].keys()
    for key, value in want["model"].items():
        assert torch.equal(got["model"][key], value), key
    for opt, state in want["optimizers"].items():
        for idx, moments in state["state"].items():
            for k, v in moments.items():
                assert torch.equal(got["optimizers"][opt]["state"][idx][k], v), f"{opt}.{idx}.{k}"


def output_and_grads(net: nn.Module, x: torch.Tensor, task: TaskIndex, threads: int):
    """``net(x, task)`` and the gradients of its mean square, computed on ``threads`` torch
    threads (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        net.zero_grad(set_to_none=True)
        y = net(x, task)
        y.pow(2).mean().backward()
        return y.detach().clone(), [p.grad.clone() for p in net.parameters()]
    finally:
        torch.set_num_threads(before)


def mlflow_client(root: Path):
    """An MLflow client on the project store at ``root``."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")


def log_file(root: Path, run_name: str, text: str) -> str:
    """One run in experiment ``train`` of the project at ``root``, with one artifact file;
    returns the run's id."""
    from ptsl.ops import tracking

    (root / "note.txt").write_text(text)
    tracker = tracking.start_run("train", run_name, stage=f"train@{run_name}", root=root)
    tracker.log_artifact(root / "note.txt")
    tracker.end()
    return tracker.run_id


def parameter_count(module: nn.Module) -> int:
    """Every parameter of ``module``, counted element by element."""
    return sum(p.numel() for p in module.parameters())


def assert_only_row_has_grad(params, row: int, what: str) -> None:
    """Each tensor of ``params`` (one row per task) has a gradient in ``row`` and exactly zero in
    every other row: the task's own parameters learn from its samples, no other task's do."""
    for p in params:
        others = torch.cat([p.grad[:row], p.grad[row + 1:]])
        assert not others.any(), f"{what} {row}: other tasks' grad is not exactly zero"
        assert p.grad[row].abs().sum() > 0, f"{what} {row}: no gradient"


def products_split_by_thread_count(batch: int, width: int = 400, in_dim: int = 39) -> bool:
    """Whether this CPU's plain matrix products (a Linear stack's output and gradients) at this
    batch already differ in their last bits between one and two threads (MKL splits them by the
    thread count on some CPUs: an AVX-512 Xeon at batch 1280)."""
    g = torch.Generator().manual_seed(7)
    net = nn.Sequential(nn.Linear(in_dim, width), nn.ReLU(), nn.Linear(width, width))
    x = torch.randn(batch, in_dim, generator=g)

    def run(threads: int):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            net.zero_grad(set_to_none=True)
            y = net(x)
            y.pow(2).mean().backward()
            return [y.detach().clone(), *[p.grad.clone() for p in net.parameters()]]
        finally:
            torch.set_num_threads(before)

    return not all(torch.equal(a, b) for a, b in zip(run(1), run(2)))


def assert_same_bits_at_one_and_two_threads(net: nn.Module, batch: int, num_tasks: int = 10,
                                            in_dim: int = 39) -> None:
    """A task-indexed trunk's output and gradients on a random batch: the same bits on one and
    on two CPU threads. Where this CPU's plain products already differ between the two (the
    agent then updates on one thread whatever the thread count: tests/unit/test_threads.py), the
    trunk's own operations cannot be told apart from them, and the check is skipped."""
    import pytest

    if products_split_by_thread_count(batch):
        pytest.skip(f"this CPU splits plain products at batch {batch} by the thread count")
    g = torch.Generator().manual_seed(5)
    x = torch.randn(batch, in_dim, generator=g)
    task = TaskIndex(torch.randint(0, num_tasks, (batch,), generator=g), num_tasks)
    y1, g1 = output_and_grads(net, x, task, 1)
    y2, g2 = output_and_grads(net, x, task, 2)
    assert torch.equal(y1, y2)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))


def assert_static_selection_gives_the_same_values(net: nn.Module, num_tasks: int = 10,
                                                  in_dim: int = 39) -> None:
    """A task-indexed trunk with the static-shape selection a CUDA graph needs: the same outputs
    as with the CPU one, gradients equal to float rounding."""
    from ptsl.core.cuda.task_index import StaticTaskIndex

    g = torch.Generator().manual_seed(6)
    x = torch.randn(256, in_dim, generator=g)
    ids = torch.randint(0, num_tasks, (256,), generator=g)
    y_cpu, g_cpu = output_and_grads(net, x, TaskIndex(ids, num_tasks), 2)
    y_static, g_static = output_and_grads(net, x, StaticTaskIndex(ids, num_tasks), 2)
    torch.testing.assert_close(y_static, y_cpu, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_static, g_cpu):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def task_index(ids: list[int] | torch.Tensor, num_tasks: int = 4) -> TaskIndex:
    """The :class:`TaskIndex` of task ids given as a list or a tensor."""
    return TaskIndex(torch.as_tensor(ids, dtype=torch.int64), num_tasks)


def assert_matches_transcription(net: nn.Module, transcribed, atol: float) -> None:
    """``net`` gives what ``transcribed(net, x, task_ids)`` (its authors' forward pass written out)
    gives on a batch of 24 rows of 12 features over 4 tasks."""
    c = torch.tensor([3, 0, 0, 2, 1, 3] * 4)
    x = torch.randn(len(c), 12)
    torch.testing.assert_close(net(x, task_index(c)), transcribed(net, x, c), rtol=1e-5,
                               atol=atol)


def backward_task_by_task(net: nn.Module, num_tasks: int = 4):
    """For each task ``i`` (yielded), ``net``'s gradients from the squared outputs of task
    ``i``'s rows alone, on a batch of 24 rows of 12 features over 4 tasks."""
    c = torch.tensor([0, 1, 2, 3, 2, 1] * 4)
    x = torch.randn(len(c), 12)
    for i in range(num_tasks):
        net.zero_grad(set_to_none=True)
        net(x, task_index(c))[c == i].pow(2).sum().backward()
        yield i
