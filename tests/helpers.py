"""Small helpers shared by the network and update tests."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ptsl.core.buffer import Batch
from ptsl.core.nets.task_index import TaskIndex


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
