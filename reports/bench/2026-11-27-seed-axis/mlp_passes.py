"""How much a seed axis could save: S MT-SAC-sized MLP forward+backward passes (study sizes:
width 163, 4 Linear layers, batch 128; actor 39->8, two Qs 43->1) one seed at a time
(nn.Linear) against one pass over weights stacked on a seed axis (baddbmm), one thread."""
import time, torch, torch.nn.functional as F
torch.set_num_threads(1)
H, B = 163, 128
def mlp_dims(i, o): return [(i, H), (H, H), (H, H), (H, o)]
NETS = [mlp_dims(39, 8), mlp_dims(43, 1), mlp_dims(43, 1)]
def make(S):
    return [[(torch.randn(S, o, i) * .05, torch.zeros(S, o)) for i, o in dims] for dims in NETS]
def run_plain(ws, xs, S):
    for s in range(S):
        loss = 0
        for net, x in zip(ws, xs):
            h = x[s]
            for k, (w, b) in enumerate(net):
                h = F.linear(h, w[s], b[s])
                if k < 3: h = F.relu(h)
            loss = loss + h.pow(2).mean()
        loss.backward()
def run_batched(ws, xs, S):
    loss = 0
    for net, x in zip(ws, xs):
        h = x
        for k, (w, b) in enumerate(net):
            h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            if k < 3: h = F.relu(h)
        loss = loss + h.pow(2).mean()
    loss.backward()
for S in (1, 2, 3, 5, 8):
    ws = make(S)
    for net in ws:
        for w, b in net: w.requires_grad_(); b.requires_grad_()
    xs = [torch.randn(S, B, 39), torch.randn(S, B, 43), torch.randn(S, B, 43)]
    res = {}
    for name, fn in (("plain", run_plain), ("batched", run_batched)) * 2:
        for _ in range(5): fn(ws, xs, S)
        t0 = time.perf_counter(); n = 100
        for _ in range(n): fn(ws, xs, S)
        res[name] = (time.perf_counter() - t0) / n * 1000
    print(f"S={S}: per seed plain {res['plain']/S:.2f} ms, batched {res['batched']/S:.2f} ms; batched {res['plain']/res['batched']:.2f}x")
