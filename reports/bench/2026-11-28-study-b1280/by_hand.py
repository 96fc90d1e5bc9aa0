"""The MLP of mlp_vs_gemms.py, its forward and backward written out by hand (the operations
autograd runs for nn.Linear and ReLU, no autograd), each kind of operation timed.
Run: .venv/bin/python reports/bench/2026-11-28-study-b1280/by_hand.py"""

import torch, time, collections
from ptsl.core.runtime import Runtime
Runtime(device="cpu", threads=1).apply()
torch.manual_seed(0)
B,H=1280,163
dims=[43,H,H,H,1]
Ws=[torch.randn(dims[i+1],dims[i])*0.1 for i in range(4)]; bs=[torch.randn(dims[i+1])*0.1 for i in range(4)]
x=torch.randn(B,43)
T=collections.defaultdict(float)
def tm(name, f):
    s=time.perf_counter(); r=f(); T[name]+=time.perf_counter()-s; return r
def step():
    hs=[x]
    for i in range(4):
        h=tm(f"fwd addmm", lambda: torch.addmm(bs[i], hs[-1], Ws[i].t()))
        if i<3: tm("fwd relu_", lambda: h.relu_())
        hs.append(h)
    g=torch.ones(B,1)
    for i in reversed(range(4)):
        tm("bwd weight mm", lambda: g.t().mm(hs[i]))
        tm("bwd bias sum", lambda: g.sum(0))
        if i>0:
            gp=tm("bwd input mm", lambda: g.mm(Ws[i]))
            g=tm("bwd threshold", lambda: torch.ops.aten.threshold_backward(gp, hs[i], 0))
for _ in range(5): step()
T.clear()
n=50; s=time.perf_counter()
for _ in range(n): step()
tot=(time.perf_counter()-s)/n*1e3
for k,v in sorted(T.items(), key=lambda kv:-kv[1]): print(f"{k:15s} {v/n*1e3:6.2f} ms")
print(f"total {tot:.2f} ms")
