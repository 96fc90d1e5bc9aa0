"""Probe (the seed-axis probe of ../2026-11-27-seed-axis/ with Adam and the target update over per-seed slices): S seeds' MT-SAC updates (mt10-cpu's sizes) as one update vmapped over parameters
stacked on a seed axis (torch.func), against each seed's own ``agent.update``; every tensor
compared after K updates, and the time per update of all seeds. Inside the vmapped losses
``F.linear`` is swapped for faithful.py's product (a probe's shortcut, nothing the project does).
From the project root: ``python reports/bench/2026-11-27g-cpu-group/group_vmap_sliced.py S K``."""
import math, sys, time
import torch
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "2026-11-27-seed-axis"))
import faithful
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap
from ptsl.ops.params import load_params, run_config
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.buffer import Batch
from ptsl.core.agent.nets.task_index import TaskIndex
from ptsl.core.agent.optim import Adam

torch.set_num_threads(1)
S = int(sys.argv[1]) if len(sys.argv) > 1 else 3
K = int(sys.argv[2]) if len(sys.argv) > 2 else 20
exp = sys.argv[3] if len(sys.argv) > 3 else "mt10_mtsac"
BATCH = int(sys.argv[4]) if len(sys.argv) > 4 else 128
params = load_params("studies/mt10-cpu/params.yaml")
T, OBS, A = 10, 39, 4

def agents():
    out = []
    for s in range(1, S + 1):
        cfg = run_config(params, exp, s)
        out.append(build_agent(cfg, Shapes(OBS, A, T), tuple(f"t{i}" for i in range(T))))
    return out

g = torch.Generator().manual_seed(123)
batches = [[Batch(obs=torch.randn(BATCH, OBS, generator=g), action=torch.rand(BATCH, A, generator=g) * 2 - 1,
                  reward=torch.randn(BATCH, 1, generator=g), next_obs=torch.randn(BATCH, OBS, generator=g),
                  not_done=torch.ones(BATCH, 1), task=torch.randint(0, T, (BATCH,), generator=g))
            for _ in range(S)] for _ in range(K)]

# ---- reference: each agent alone
alone = agents()
t0 = time.perf_counter()
for k in range(K):
    for s in range(S):
        alone[s].update(batches[k][s])
t_alone = (time.perf_counter() - t0) / K

# ---- group
grp = agents()
a0 = grp[0]
sac = a0.sac
def stacked(mods, grad=True):
    p, _ = stack_module_state(mods)
    return {k: v.detach().clone().requires_grad_(grad) for k, v in p.items()}
pa = stacked([a.actor for a in grp])
pc = stacked([a.critic for a in grp])
pt = stacked([a.critic_target for a in grp], grad=False)
la = torch.stack([a.log_alpha.detach() for a in grp]).clone().requires_grad_(True)
gens = [a.generator for a in grp]
actor_keys = [k for k in pa if k.startswith("trunk.")]
class SlicedAdam:
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
    def zero_grad(self, set_to_none=True):
        for p in self.params: p.grad = None
o_actor = SlicedAdam([pa[k] for k in actor_keys], sac.actor_lr)
o_critic = SlicedAdam(list(pc.values()), sac.critic_lr)
o_alpha = SlicedAdam([la], sac.alpha_lr)

def squash(mu, log_std, noise):
    pre = mu + noise * log_std.exp()
    action = torch.tanh(pre)
    log_pi = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
    log_pi = log_pi - torch.log(F.relu(1 - action.pow(2)) + 1e-6).sum(-1, keepdim=True)
    return action, log_pi

def critic_loss(pa, pc, pt, la, obs, act, rew, nobs, nd, ids, n1):
    task = TaskIndex(ids, T)
    with torch.no_grad():
        mu, ls = functional_call(a0.actor, pa, (nobs, task, None))
        na, nlp = squash(mu, ls, n1)
        tq1, tq2 = functional_call(a0.critic_target, pt, (nobs, na, task, None))
        tv = torch.min(tq1, tq2) - task.entries(la.exp()) * nlp
        tq = rew + nd * sac.discount * tv
    q1, q2 = functional_call(a0.critic, pc, (obs, act, task, None))
    return F.mse_loss(q1, tq) + F.mse_loss(q2, tq)

def actor_losses(pa, pc, la, obs, ids, n2):
    task = TaskIndex(ids, T)
    mu, ls = functional_call(a0.actor, pa, (obs, task, None, True))
    action, log_pi = squash(mu, ls, n2)
    aq1, aq2 = functional_call(a0.critic, pc, (obs, action, task, None, True))
    alpha = task.entries(la.exp())
    actor_loss = (alpha.detach() * log_pi - torch.min(aq1, aq2)).mean()
    alpha_loss = (alpha * (-log_pi - a0.target_entropy).detach()).mean()
    return actor_loss + alpha_loss

LIN = F.linear
t0 = time.perf_counter()
for k in range(K):
    b = batches[k]
    st = lambda f: torch.stack([getattr(x, f) for x in b])
    obs, act, rew, nobs, nd, ids = (st(f) for f in ("obs", "action", "reward", "next_obs", "not_done", "task"))
    n1 = torch.stack([torch.randn(BATCH, A, generator=gg) for gg in gens])
    n2 = torch.stack([torch.randn(BATCH, A, generator=gg) for gg in gens])
    F.linear = faithful.linear
    cl = vmap(critic_loss)(pa, pc, pt, la, obs, act, rew, nobs, nd, ids, n1)
    o_critic.zero_grad(set_to_none=True)
    F.linear = LIN
    cl.sum().backward(inputs=list(pc.values()))
    o_critic.step()
    F.linear = faithful.linear
    al = vmap(actor_losses)(pa, pc, la, obs, ids, n2)
    F.linear = LIN
    o_actor.zero_grad(set_to_none=True); o_alpha.zero_grad(set_to_none=True)
    al.sum().backward(inputs=[*(pa[k] for k in actor_keys), la])
    o_actor.step(); o_alpha.step()
    with torch.no_grad():
        qk = [k for k in pt if k.startswith("q1.") or k.startswith("q2.")]
        torch._foreach_lerp_([pt[k][s] for k in qk for s in range(S)], [pc[k][s] for k in qk for s in range(S)], sac.tau)
t_group = (time.perf_counter() - t0) / K

eq = []
for s in range(S):
    ref = alone[s]
    for name, p in ref.actor.named_parameters(): eq.append((f"{s}:actor." + name, torch.equal(p, pa[name][s])))
    for name, p in ref.critic.named_parameters(): eq.append((f"{s}:critic." + name, torch.equal(p, pc[name][s])))
    for name, p in ref.critic_target.named_parameters(): eq.append((f"{s}:target." + name, torch.equal(p, pt[name][s])))
    eq.append((f"{s}:log_alpha", torch.equal(ref.log_alpha, la[s])))
bad = [n for n, e in eq if not e]
print(f"{exp} S={S} K={K} batch={BATCH}: {len(eq) - len(bad)}/{len(eq)} tensors equal; "
      f"alone {1000 * t_alone:.1f} ms per update of all seeds, group {1000 * t_group:.1f} ms ({t_alone / t_group:.2f}x)")
if bad: print(bad); print("differ:", sorted(set(b.split(".")[0] for b in bad)), len(bad)); print("equal:", [n for n, e in eq if e][:20])
