"""Probe (issue 46, points 1-2 and 4): MT-SAC's update for S seeds written over weights stacked on a
seed axis by hand (no vmap), each operation chosen so that every seed gets the bits of its own
``agent.update``; compared tensor by tensor with S agents updated one by one after K updates, and
timed against them. From the project root:
``python reports/bench/2026-11-27g-cpu-group/faithful_group.py S K [BATCH] [THREADS]``.

The rules it tests (each a hypothesis the comparison can refute):
- products: one ``baddbmm``/``bmm`` for all seeds in the orientation autograd uses for one seed
  (forward ``x W^T``, ``g W``, ``x^T g``), one product per seed where a side is 1;
- reductions (bias gradients, loss means, ``log_pi``'s sum) and anything over a tensor of fewer
  elements than a vector loop's unroll (per-task temperatures) per seed, on each seed's slice;
- element-wise operations over the stacked tensor (each seed's part a whole multiple of the
  vector loop's 32 floats at batch 128 and 1280, so no seed element falls to the scalar tail);
- Adam and the target update as torch's fused and foreach kernels over per-seed slices (the
  same element count, hence the same split between vector body and scalar tail, as one seed's).
"""
from __future__ import annotations

import math
import sys
import time

import torch
import torch.nn.functional as F

from ptsl.core.agent.buffer import Batch
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.ops.params import load_params, run_config

S = int(sys.argv[1]) if len(sys.argv) > 1 else 3
K = int(sys.argv[2]) if len(sys.argv) > 2 else 10
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 128
THREADS = int(sys.argv[4]) if len(sys.argv) > 4 else 1
EXP = "mt10_mtsac"
T, OBS, A = 10, 39, 4
torch.set_num_threads(THREADS)
#: Reductions over the stacked tensor at once instead of per seed (a hypothesis to test).
BATCHED_SUMS = __import__("os").environ.get("BATCHED_SUMS") == "1"
params = load_params("studies/mt10-cpu/params.yaml")


def agents():
    return [build_agent(run_config(params, EXP, s), Shapes(OBS, A, T),
                        tuple(f"t{i}" for i in range(T))) for s in range(1, S + 1)]


g = torch.Generator().manual_seed(123)
batches = [[Batch(obs=torch.randn(BATCH, OBS, generator=g),
                  action=torch.rand(BATCH, A, generator=g) * 2 - 1,
                  reward=torch.randn(BATCH, 1, generator=g),
                  next_obs=torch.randn(BATCH, OBS, generator=g),
                  not_done=(torch.rand(BATCH, 1, generator=g) > 0.1).float(),
                  task=torch.randint(0, T, (BATCH,), generator=g))
            for _ in range(S)] for _ in range(K)]


class GLinear(torch.autograd.Function):
    """y[s] = x[s] W[s]^T + b[s] for every seed, each seed's bits as F.linear's."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        if 1 in (w.shape[1], w.shape[2]):
            return torch.stack([F.linear(x[s], w[s], b[s]) for s in range(x.shape[0])])
        return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        n = x.shape[0]
        if 1 in (w.shape[1], w.shape[2]):
            gx = torch.stack([g[s].mm(w[s]) for s in range(n)])
            gw = torch.stack([x[s].t().mm(g[s]).t() for s in range(n)])
        else:
            gx = torch.bmm(g, w)
            gw = torch.bmm(x.transpose(1, 2), g).transpose(1, 2)
        gb = g.sum(1) if BATCHED_SUMS else torch.stack([g[s].sum(0) for s in range(n)])
        return gx, gw, gb


def mlp(p, prefix, nlin, x):
    for i in range(nlin):
        x = GLinear.apply(x, p[f"{prefix}.{2 * i}.weight"], p[f"{prefix}.{2 * i}.bias"])
        if i < nlin - 1:
            x = torch.relu(x)
    return x


def stack(mods):
    names = [n for n, _ in mods[0].named_parameters()]
    out = {}
    for n in names:
        out[n] = torch.stack([dict(m.named_parameters())[n].detach() for m in mods]).clone()
    return out


# ---- reference: each agent alone
alone = agents()
t0 = time.perf_counter()
for k in range(K):
    for s in range(S):
        alone[s].update(batches[k][s])
t_alone = (time.perf_counter() - t0) / K

grp = agents()
a0 = grp[0]
sac = a0.sac
NL = sum(1 for n, _ in a0.actor.trunk.named_parameters() if n.endswith("weight"))
pa = {k: v.requires_grad_(True) for k, v in stack([a.actor for a in grp]).items()}
pc = {k: v.requires_grad_(True) for k, v in stack([a.critic for a in grp]).items()}
pt = stack([a.critic_target for a in grp])
la = torch.stack([a.log_alpha.detach() for a in grp]).clone().requires_grad_(True)
gens = [a.generator for a in grp]
lo, hi = a0.actor.log_std_min, a0.actor.log_std_max


class SlicedAdam:
    """torch's fused Adam over per-seed slices of stacked parameters (as each seed's optimiser)."""

    def __init__(self, params, lr):
        self.params, self.lr = params, lr
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.steps = [torch.zeros(()) for _ in params for _ in range(S)]

    def step(self):
        ps, gs, ms, vs = [], [], [], []
        for p, m, v in zip(self.params, self.m, self.v):
            for s in range(S):
                ps.append(p.data[s]); gs.append(p.grad[s]); ms.append(m[s]); vs.append(v[s])
        torch._foreach_add_(self.steps, 1)
        torch._fused_adam_(ps, gs, ms, vs, [], self.steps, lr=self.lr, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)

    def zero_grad(self):
        for p in self.params:
            p.grad = None


actor_keys = [k for k in pa if k.startswith("trunk.")]
o_actor = SlicedAdam([pa[k] for k in actor_keys], sac.actor_lr)
o_critic = SlicedAdam(list(pc.values()), sac.critic_lr)
o_alpha = SlicedAdam([la], sac.alpha_lr)


def actor(x):
    out = mlp(pa, "trunk.net", NL, x)
    mu, raw = out.chunk(2, dim=-1)
    return mu, lo + 0.5 * (hi - lo) * (torch.tanh(raw) + 1)


def q(p, x, a):
    h = torch.cat([x, a], dim=-1)
    return mlp(p, "q1.net", NL, h), mlp(p, "q2.net", NL, h)


def squash(mu, log_std, noise):
    pre = mu + noise * log_std.exp()
    action = torch.tanh(pre)
    if BATCHED_SUMS:
        lp = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) \
            - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
        lp = lp - torch.log(F.relu(1 - action.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return action, lp
    lp = torch.stack([(-0.5 * noise[s].pow(2) - log_std[s]).sum(-1, keepdim=True)
                      for s in range(S)]) - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
    corr = torch.log(F.relu(1 - action.pow(2)) + 1e-6)
    lp = lp - torch.stack([corr[s].sum(-1, keepdim=True) for s in range(S)])
    return action, lp


def alpha_rows(ids):
    return torch.stack([la[s].exp()[ids[s]].unsqueeze(-1) for s in range(S)])


t0 = time.perf_counter()
_one = torch.get_num_threads()
torch.set_num_threads(1)  # as the agent's update: one thread whatever the process has
_prof = None
if __import__("os").environ.get("PROFILE") == "1":
    _prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    _prof.__enter__()
for k in range(K):
    b = batches[k]
    st = lambda f: torch.stack([getattr(x, f) for x in b])
    obs, act, rew, nobs, nd, ids = (st(f) for f in ("obs", "action", "reward", "next_obs",
                                                    "not_done", "task"))
    with torch.no_grad():
        mu, ls = actor(nobs)
        n1 = torch.stack([torch.randn(mu[s].shape, generator=gens[s]) for s in range(S)])
        na, nlp = squash(mu, ls, n1)
        tq1, tq2 = q(pt, nobs, na)
        tv = torch.min(tq1, tq2) - alpha_rows(ids) * nlp
        tq = rew + nd * sac.discount * tv
    q1, q2 = q(pc, obs, act)
    if BATCHED_SUMS:
        cl = [((q1 - tq).pow(2).mean((1, 2)) + (q2 - tq).pow(2).mean((1, 2))).sum()]
    else:
        cl = [F.mse_loss(q1[s], tq[s]) + F.mse_loss(q2[s], tq[s]) for s in range(S)]
    o_critic.zero_grad()
    torch.stack(cl).sum().backward()
    o_critic.step()

    mu, ls = actor(obs)
    n2 = torch.stack([torch.randn(mu[s].shape, generator=gens[s]) for s in range(S)])
    action, log_pi = squash(mu, ls, n2)
    aq1, aq2 = q({k: v.detach() for k, v in pc.items()}, obs, action)
    alpha = alpha_rows(ids)
    if BATCHED_SUMS:
        la_ = [((alpha.detach() * log_pi - torch.min(aq1, aq2)).mean((1, 2))
                + (alpha * (-log_pi - a0.target_entropy).detach()).mean((1, 2))).sum()]
    else:
        la_ = [((alpha[s].detach() * log_pi[s] - torch.min(aq1[s], aq2[s])).mean()
                + (alpha[s] * (-log_pi[s] - a0.target_entropy).detach()).mean()) for s in range(S)]
    o_actor.zero_grad()
    o_alpha.zero_grad()
    torch.stack(la_).sum().backward(inputs=[*(pa[k] for k in actor_keys), la])
    o_actor.step()
    o_alpha.step()
    with torch.no_grad():
        qk = [k for k in pt if k.startswith(("q1.", "q2."))]
        torch._foreach_lerp_([pt[k][s] for k in qk for s in range(S)],
                             [pc[k][s] for k in qk for s in range(S)], sac.tau)
t_group = (time.perf_counter() - t0) / K
if _prof is not None:
    _prof.__exit__(None, None, None)
    print(_prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22))
torch.set_num_threads(_one)

eq = []
for s in range(S):
    ref = alone[s]
    for n, p in ref.actor.named_parameters():
        eq.append((f"{s}:actor.{n}", torch.equal(p, pa[n][s])))
    for n, p in ref.critic.named_parameters():
        eq.append((f"{s}:critic.{n}", torch.equal(p, pc[n][s])))
    for n, p in ref.critic_target.named_parameters():
        eq.append((f"{s}:target.{n}", torch.equal(p, pt[n][s])))
    eq.append((f"{s}:log_alpha", torch.equal(ref.log_alpha, la[s])))
bad = [n for n, e in eq if not e]
print(f"{EXP} S={S} K={K} batch={BATCH} threads={THREADS} batched sums {BATCHED_SUMS}: {len(eq) - len(bad)}/{len(eq)} "
      f"tensors equal; alone {1e3 * t_alone:.1f} ms per update of all seeds, group "
      f"{1e3 * t_group:.1f} ms ({t_alone / t_group:.2f}x)")
if bad:
    print("differ:", bad[:12])
