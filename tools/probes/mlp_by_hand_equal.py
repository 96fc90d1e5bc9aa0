"""The MLP of study_mlp.py: the gradients of its forward and backward written out by hand
against autograd's, bit for bit, and the two timed in turn.
Run from the project root: .venv/bin/python tools/probes/mlp_by_hand_equal.py
(record: reports/bench/2026-11-28-study-b1280/)."""

import torch

from study_mlp import BATCH, by_hand, net, per_call_ms, x

grad_out = torch.randn(BATCH, 1)


def autograd_grads():
    net.zero_grad(set_to_none=True)
    net(x).backward(grad_out)
    return [p.grad for p in net.parameters()]


equal = [torch.equal(a, b) for a, b in zip(autograd_grads(), by_hand(grad_out))]
print(f"parameters whose gradients are equal bit for bit: {sum(equal)} of {len(equal)}")
for _ in range(4):
    print(f"autograd {per_call_ms(autograd_grads, 40):.2f} ms, "
          f"by hand {per_call_ms(lambda: by_hand(grad_out), 40):.2f} ms")
