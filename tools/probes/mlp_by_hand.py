"""The MLP of study_mlp.py, its forward and backward written out by hand (the operations
autograd runs for nn.Linear and ReLU, no autograd), each kind of operation timed.
Run from the project root: .venv/bin/python tools/probes/mlp_by_hand.py
(record: reports/bench/2026-11-28-study-b1280/)."""

import collections
import time

import torch

from study_mlp import BATCH, by_hand

seconds = collections.defaultdict(float)


def timed(kind, f):
    start = time.perf_counter()
    out = f()
    seconds[kind] += time.perf_counter() - start
    return out


ones = torch.ones(BATCH, 1)
for _ in range(5):
    by_hand(ones, timed)
seconds.clear()
n, start = 50, time.perf_counter()
for _ in range(n):
    by_hand(ones, timed)
total = (time.perf_counter() - start) / n * 1e3
for kind, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
    print(f"{kind:15s} {s / n * 1e3:6.2f} ms")
print(f"total {total:.2f} ms")
