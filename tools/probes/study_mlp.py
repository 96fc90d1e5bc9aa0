"""What the MLP probes share: a plain MLP of MT-SAC's width in study mt10-b1280 (input 43, three
hidden layers of 163, one output) at batch 1,280, on one thread, and a per-call timer.

Imported by the probes beside it (run as scripts, so this folder is on ``sys.path``)."""

import time

import torch

from ptsl.core.runtime import Runtime

Runtime(device="cpu", threads=1).apply()  # the process set-up of a one-thread training stage
torch.manual_seed(0)
BATCH, WIDTH, INPUT = 1280, 163, 43
net = torch.nn.Sequential(torch.nn.Linear(INPUT, WIDTH), torch.nn.ReLU(),
                          torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
                          torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
                          torch.nn.Linear(WIDTH, 1))
linears = [m for m in net if isinstance(m, torch.nn.Linear)]
x = torch.randn(BATCH, INPUT)


def per_call_ms(f, n: int = 50) -> float:
    """Milliseconds a call of ``f`` takes, the mean of ``n`` calls after five warm-up calls."""
    for _ in range(5):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e3


@torch.no_grad()
def by_hand(grad_out: torch.Tensor, timed=lambda kind, f: f()) -> list[torch.Tensor]:
    """The gradients of ``net``'s parameters for ``grad_out`` at its output, forward and backward
    written out as the operations autograd runs for ``nn.Linear`` and ReLU (no autograd), in
    ``net.parameters()``'s order; ``timed(kind, f)`` runs each operation ``f`` (a hook for
    timing each kind)."""
    acts = [x]
    for i, layer in enumerate(linears):
        h = timed("fwd addmm", lambda: torch.addmm(layer.bias, acts[-1], layer.weight.t()))
        if i < len(linears) - 1:
            timed("fwd relu_", h.relu_)
        acts.append(h)
    g, grads = grad_out, [None] * (2 * len(linears))
    for i in reversed(range(len(linears))):
        grads[2 * i] = timed("bwd weight mm", lambda: g.t().mm(acts[i]))
        grads[2 * i + 1] = timed("bwd bias sum", lambda: g.sum(0))
        if i > 0:
            g_in = timed("bwd input mm", lambda: g.mm(linears[i].weight))
            g = timed("bwd threshold",
                      lambda: torch.ops.aten.threshold_backward(g_in, acts[i], 0))
    return grads
