"""The MLP of study_mlp.py: its forward and backward against the same products alone, on
operands kept hot in cache.
Run from the project root: .venv/bin/python tools/probes/mlp_vs_gemms.py
(record: reports/bench/2026-11-28-study-b1280/)."""

import torch

from study_mlp import BATCH, INPUT, WIDTH, net, per_call_ms, x

W, W1 = torch.randn(WIDTH, WIDTH), torch.randn(WIDTH, INPUT)
a, g = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)


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
