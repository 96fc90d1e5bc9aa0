"""The MLP of mlp_vs_gemms.py: the gradients of its forward and backward written out by hand
against autograd's, bit for bit, and the two timed in turn.
Run: .venv/bin/python reports/bench/2026-11-28-study-b1280/by_hand_equal.py"""

import time

import torch

from ptsl.core.runtime import Runtime

Runtime(device="cpu", threads=1).apply()
torch.manual_seed(0)
B, H = 1280, 163
net = torch.nn.Sequential(torch.nn.Linear(43, H), torch.nn.ReLU(), torch.nn.Linear(H, H),
                          torch.nn.ReLU(), torch.nn.Linear(H, H), torch.nn.ReLU(),
                          torch.nn.Linear(H, 1))
x, grad_out = torch.randn(B, 43), torch.randn(B, 1)
linears = [m for m in net if isinstance(m, torch.nn.Linear)]


def autograd_grads():
    net.zero_grad(set_to_none=True)
    net(x).backward(grad_out)
    return [p.grad for p in net.parameters()]


@torch.no_grad()
def by_hand_grads():
    acts = [x]
    for i, layer in enumerate(linears):
        h = torch.addmm(layer.bias, acts[-1], layer.weight.t())
        if i < len(linears) - 1:
            h.relu_()
        acts.append(h)
    g, grads = grad_out, [None] * (2 * len(linears))
    for i in reversed(range(len(linears))):
        grads[2 * i], grads[2 * i + 1] = g.t().mm(acts[i]), g.sum(0)
        if i > 0:
            g = torch.ops.aten.threshold_backward(g.mm(linears[i].weight), acts[i], 0)
    return grads


equal = [torch.equal(a, b) for a, b in zip(autograd_grads(), by_hand_grads())]
print(f"parameters whose gradients are equal bit for bit: {sum(equal)} of {len(equal)}")


def per_call_ms(f, n=40):
    for _ in range(5):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e3


for _ in range(4):
    print(f"autograd {per_call_ms(autograd_grads):.2f} ms, by hand {per_call_ms(by_hand_grads):.2f} ms")
