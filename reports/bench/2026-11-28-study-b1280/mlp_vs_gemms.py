"""A plain MLP of MT-SAC's study width (3 hidden layers of 163, input 43) at batch 1,280 on one
thread: its forward and backward against the same products alone, on operands kept hot in cache.
Run: .venv/bin/python reports/bench/2026-11-28-study-b1280/mlp_vs_gemms.py"""

import time

import torch

from ptsl.core.runtime import Runtime

Runtime(device="cpu", threads=1).apply()
torch.manual_seed(0)
B, H = 1280, 163
net = torch.nn.Sequential(torch.nn.Linear(43, H), torch.nn.ReLU(), torch.nn.Linear(H, H),
                          torch.nn.ReLU(), torch.nn.Linear(H, H), torch.nn.ReLU(),
                          torch.nn.Linear(H, 1))
x = torch.randn(B, 43)
W, W1 = torch.randn(H, H), torch.randn(H, 43)
a, g = torch.randn(B, H), torch.randn(B, H)


def per_call_ms(f, n=50):
    for _ in range(5):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e3


def forward_backward():
    net.zero_grad(set_to_none=True)
    net(x).sum().backward()


def products():  # the three hidden layers' products: forward, input gradients, weight gradients
    torch.mm(x, W1.t()), torch.mm(a, W.t()), torch.mm(a, W.t())
    torch.mm(g, W), torch.mm(g, W)
    torch.mm(g.t(), a), torch.mm(g.t(), a), torch.mm(g.t(), x)


for _ in range(3):
    fb, pr = per_call_ms(forward_backward), per_call_ms(products)
    print(f"forward+backward {fb:.2f} ms; its products alone {pr:.2f} ms; ratio {fb / pr:.2f}")
