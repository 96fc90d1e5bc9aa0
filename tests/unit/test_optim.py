"""ptsl.core.agent.optim.Adam is torch.optim.Adam to the bit, without importing torch._dynamo."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from ptsl.core.agent.optim import Adam


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(64, 39, generator=g)),
            torch.nn.Parameter(torch.randn(64, generator=g)),
            torch.nn.Parameter(torch.randn(1, generator=g))]


def _steps(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter], steps: int,
           seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        for p in params:
            p.grad = torch.randn(p.shape, generator=g) * 10.0 ** torch.randint(-6, 3, (1,),
                                                                                 generator=g)
        opt.step()


def _same(a: torch.optim.Optimizer, b: torch.optim.Optimizer,
          pa: list[torch.nn.Parameter], pb: list[torch.nn.Parameter]) -> None:
    for x, y in zip(pa, pb):
        assert torch.equal(x, y)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for k in sa["state"]:
        for name, value in sa["state"][k].items():
            assert torch.equal(value, sb["state"][k][name]), name


@pytest.mark.parametrize("options", [{"fused": True}, {"foreach": True}, {"foreach": False},
                                     {"fused": True, "weight_decay": 0.1, "amsgrad": True}])
def test_steps_and_state_are_torchs_to_the_bit(options):
    ours, theirs = _params(0), _params(0)
    a, b = Adam(ours, lr=3e-4, **options), torch.optim.Adam(theirs, lr=3e-4, **options)
    _steps(a, ours, 5, seed=1)
    _steps(b, theirs, 5, seed=1)
    _same(a, b, ours, theirs)
    # Each loads (a copy of) the other's state and both go on alike.
    a.load_state_dict(copy.deepcopy(b.state_dict()))
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    _steps(a, ours, 3, seed=2)
    _steps(b, theirs, 3, seed=2)
    _same(a, b, ours, theirs)


def test_step_hooks_and_the_grad_mode_are_torchs():
    params = _params(0)
    opt = Adam(params, lr=1e-3)
    seen = []
    opt.register_step_pre_hook(lambda o, args, kwargs: seen.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append("post"))
    grad_mode = []
    opt.register_step_post_hook(lambda o, args, kwargs: grad_mode.append(torch.is_grad_enabled()))
    _steps(opt, params, 1, seed=0)
    assert seen == ["pre", "post"] and grad_mode == [True]  # restored after the step
    assert opt.step(lambda: torch.tensor(2.0)).item() == 2.0  # a closure's loss is returned


def test_training_imports_no_dynamo_where_torchs_adam_does():
    """In a fresh process: an agent's updates, checkpoint and resume leave torch._dynamo
    unimported; torch's own Adam then imports it (the check can fail)."""
    code = """
import sys
import torch
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.benchmarks import benchmark_tasks
from ptsl.ops.params import load_params, run_config
from tests.helpers import random_batch
agent = build_agent(run_config(load_params("params.yaml"), "mt10_care", 1), Shapes(39, 4, 10),
                    benchmark_tasks("mt10"))
batch = random_batch(32, seed=0, obs_dim=39, num_tasks=10)
agent.update(batch)
agent.load_training_state(agent.training_state())
agent.update(batch)
print("torch._dynamo" in sys.modules)
p = torch.nn.Parameter(torch.zeros(2))
torch.optim.Adam([p]).zero_grad()
print("torch._dynamo" in sys.modules)
"""
    from ..conftest import ROOT

    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.stdout.split() == ["False", "True"], proc.stderr[-3000:]
