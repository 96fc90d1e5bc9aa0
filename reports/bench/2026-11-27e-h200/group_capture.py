"""Probe (issue 46, point 5): S seeds of one MT10 row at the paper's size (width 400, batch 1,280),
updated as today's loop would in one process (S captured updates, one per seed, replayed in turn)
against one captured update of all S seeds: the update vmapped over weights stacked on a seed
axis (torch.func), each seed with its own sampler and noise generators, fused capturable Adam on
the stacked tensors, the target update as one ``lerp``. Prints the time per update of all seeds
for both, and how far each seed's weights are from its own update's after the same batches.

A probe of the group's speed on a GPU, not the project's group: the losses below restate the
agent's update for networks without an observation encoder or task encoder (MT-SAC,
MT-SAC+PTSL). From the project root: ``python reports/bench/2026-11-27e-h200/group_capture.py
[EXP] [S ...]`` (on CPU it runs eagerly, to check the probe)."""
from __future__ import annotations

import math
import sys
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.optim import Adam
from ptsl.core.benchmarks import ACTION_DIM, OBS_DIM
from ptsl.core.cuda import accelerate
from ptsl.core.cuda.buffer import DeviceSampler
from ptsl.core.cuda.task_index import StaticTaskIndex
from ptsl.ops.params import load_params, run_config
from ptsl.tools.bench.updates import BUFFER_ROWS, PAPER_BATCH, random_buffer

EXP = sys.argv[1] if len(sys.argv) > 1 else "mt10_mtsac"
SIZES = [int(a) for a in sys.argv[2:]] or [1, 2, 5, 10]
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
GRAPH = DEV.type == "cuda"
T = 10
TASKS = tuple(f"t{i}" for i in range(T))
B = PAPER_BATCH if GRAPH else 128
ROWS = BUFFER_ROWS if GRAPH else 2000
PARAMS = load_params("params.yaml")
#: HAND=1: the group's update written by hand over the stacked weights instead of vmapped.
HAND = __import__("os").environ.get("HAND") == "1"
torch.set_num_threads(1)


def agent(seed: int):
    cfg = run_config(PARAMS, EXP, seed)
    cfg = cfg.model_copy(update={"sac": cfg.sac.model_copy(update={"batch_size": B,
                                                                    "buffer_capacity": ROWS})})
    return build_agent(cfg, Shapes(OBS_DIM, ACTION_DIM, T), TASKS, DEV)


def sync():
    if GRAPH:
        torch.cuda.synchronize()


def alone(S: int):
    """S agents, each with today's device buffer and update (captured on CUDA)."""
    out = []
    for s in range(1, S + 1):
        a = agent(s)
        buf, upd = accelerate(a, a.sac, OBS_DIM, ACTION_DIM, seed=s, graph=GRAPH)
        random_buffer(T, size=ROWS, buf=buf)
        out.append((a, buf, upd))
    return out


class Group:
    """S seeds' updates as one: weights stacked on a leading seed axis, every loss vmapped."""

    def __init__(self, S: int) -> None:
        ags = [agent(s) for s in range(1, S + 1)]
        self.a0, sac = ags[0], ags[0].sac
        self.sac = sac
        bufs = []
        for s, a in enumerate(ags, 1):  # the same rows and sampler seeds as alone()'s buffers
            from ptsl.core.cuda.buffer import DeviceReplayBuffer
            b = DeviceReplayBuffer(ROWS, OBS_DIM, ACTION_DIM, DEV, s)
            random_buffer(T, size=ROWS, buf=b)
            bufs.append(b)
        self.samplers = [DeviceSampler(b, b.generator) for b in bufs]
        self.data = torch.stack([b.data for b in bufs])
        self.fields = bufs[0].fields
        self.gens = [a.generator for a in ags] + [b.generator for b in bufs]
        self.agen = [a.generator for a in ags]

        def stacked(mods, grad=True):
            p, bb = stack_module_state(mods)
            p = {k: v.detach().clone().requires_grad_(grad) for k, v in p.items()}
            return p, {k: v.detach().clone() for k, v in bb.items()}

        self.pa, self.ba = stacked([a.actor for a in ags])
        self.pc, self.bc = stacked([a.critic for a in ags])
        self.pt, self.bt = stacked([a.critic_target for a in ags], grad=False)
        self.la = torch.stack([a.log_alpha.detach() for a in ags]).clone().requires_grad_(True)
        self.actor_keys = [k for k in self.pa if k.startswith("trunk.")]
        assert len(self.actor_keys) == len(self.pa), f"{EXP}: an actor encoder; not in this probe"
        opt = dict(fused=True, capturable=GRAPH)
        self.o_actor = Adam([self.pa[k] for k in self.actor_keys], lr=sac.actor_lr, **opt)
        self.o_critic = Adam(list(self.pc.values()), lr=sac.critic_lr, **opt)
        self.o_alpha = Adam([self.la], lr=sac.alpha_lr, **opt)
        self.idx = torch.zeros((S, B), dtype=torch.int64, device=DEV)
        self.S = S

    @staticmethod
    def squash(mu, log_std, noise):
        pre = mu + noise * log_std.exp()
        action = torch.tanh(pre)
        log_pi = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) \
            - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
        log_pi = log_pi - torch.log(F.relu(1 - action.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return action, log_pi

    def step(self) -> None:
        a0, sac, S = self.a0, self.sac, self.S
        for s, smp in enumerate(self.samplers):
            smp.draw(self.idx[s])
        rows = torch.gather(self.data, 1, self.idx.unsqueeze(-1).expand(S, B, self.data.shape[-1]))
        f = self.fields(rows.view(S * B, -1))
        view = lambda x: x.reshape(S, B, *x.shape[1:])
        obs, act, rew, nobs, nd, ids = map(view, (f.obs, f.action, f.reward, f.next_obs,
                                                  f.not_done, f.task))
        n1 = torch.stack([torch.randn(B, ACTION_DIM, generator=g, device=DEV) for g in self.agen])

        def critic_loss(pa, ba, pc, bc, pt, bt, la, obs, act, rew, nobs, nd, ids, n1):
            task = StaticTaskIndex(ids, T)
            with torch.no_grad():
                mu, ls = functional_call(a0.actor, (pa, ba), (nobs, task, None))
                na, nlp = self.squash(mu, ls, n1)
                tq1, tq2 = functional_call(a0.critic_target, (pt, bt), (nobs, na, task, None))
                tv = torch.min(tq1, tq2) - task.entries(la.exp()) * nlp
                tq = rew + nd * sac.discount * tv
            q1, q2 = functional_call(a0.critic, (pc, bc), (obs, act, task, None))
            return F.mse_loss(q1, tq) + F.mse_loss(q2, tq)

        cl = vmap(critic_loss)(self.pa, self.ba, self.pc, self.bc, self.pt, self.bt, self.la,
                               obs, act, rew, nobs, nd, ids, n1)
        self.o_critic.zero_grad(set_to_none=True)
        cl.sum().backward(inputs=list(self.pc.values()))
        self.o_critic.step()

        n2 = torch.stack([torch.randn(B, ACTION_DIM, generator=g, device=DEV) for g in self.agen])

        def actor_losses(pa, ba, pc, bc, la, obs, ids, n2):
            task = StaticTaskIndex(ids, T)
            mu, ls = functional_call(a0.actor, (pa, ba), (obs, task, None, True))
            action, log_pi = self.squash(mu, ls, n2)
            aq1, aq2 = functional_call(a0.critic, (pc, bc), (obs, action, task, None, True))
            alpha = task.entries(la.exp())
            actor_loss = (alpha.detach() * log_pi - torch.min(aq1, aq2)).mean()
            alpha_loss = (alpha * (-log_pi - a0.target_entropy).detach()).mean()
            return actor_loss + alpha_loss

        al = vmap(actor_losses)(self.pa, self.ba, self.pc, self.bc, self.la, obs, ids, n2)
        self.o_actor.zero_grad(set_to_none=True)
        self.o_alpha.zero_grad(set_to_none=True)
        al.sum().backward(inputs=[*(self.pa[k] for k in self.actor_keys), self.la])
        self.o_actor.step()
        self.o_alpha.step()
        with torch.no_grad():
            qk = [k for k in self.pt if k.startswith(("q1.", "q2."))]
            torch._foreach_lerp_([self.pt[k] for k in qk], [self.pc[k] for k in qk], sac.tau)


class GLinear(torch.autograd.Function):
    """y[s] = x[s] W[s]^T + b[s] for every seed: one batched product, one per seed where a side
    is 1 (the rule that keeps each seed's bits on CPU, ``../2026-11-27g-cpu-group/``)."""

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
        return gx, gw, g.sum(1)


class HandGroup(Group):
    """The same group with the update written by hand over the stacked weights (no vmap), as
    the CPU probe that keeps every seed's bits does (MT-SAC only)."""

    def mlp(self, p, prefix, x):
        n = sum(1 for k in p if k.startswith(prefix) and k.endswith("weight"))
        for i in range(n):
            x = GLinear.apply(x, p[f"{prefix}.{2 * i}.weight"], p[f"{prefix}.{2 * i}.bias"])
            if i < n - 1:
                x = torch.relu(x)
        return x

    def actor(self, x):
        mu, raw = self.mlp(self.pa, "trunk.net", x).chunk(2, dim=-1)
        lo, hi = self.a0.actor.log_std_min, self.a0.actor.log_std_max
        return mu, lo + 0.5 * (hi - lo) * (torch.tanh(raw) + 1)

    def q(self, p, x, a):
        h = torch.cat([x, a], dim=-1)
        return self.mlp(p, "q1.net", h), self.mlp(p, "q2.net", h)

    def alpha_rows(self, ids):
        """Each row's temperature, gathered from the per-task table broadcast to every row (the
        static, deterministic selection of ``ptsl.core.cuda.task_index``)."""
        table = self.la.exp().unsqueeze(1).expand(self.S, ids.shape[1], self.la.shape[1])
        return table.gather(2, ids.unsqueeze(-1))

    def step(self) -> None:
        sac, S = self.sac, self.S
        for s, smp in enumerate(self.samplers):
            smp.draw(self.idx[s])
        rows = torch.gather(self.data, 1, self.idx.unsqueeze(-1).expand(S, B, self.data.shape[-1]))
        f = self.fields(rows.view(S * B, -1))
        view = lambda x: x.reshape(S, B, *x.shape[1:])
        obs, act, rew, nobs, nd, ids = map(view, (f.obs, f.action, f.reward, f.next_obs,
                                                  f.not_done, f.task))
        with torch.no_grad():
            mu, ls = self.actor(nobs)
            n1 = torch.stack([torch.randn(B, ACTION_DIM, generator=g, device=DEV) for g in self.agen])
            na, nlp = self.squash(mu, ls, n1)
            tq1, tq2 = self.q(self.pt, nobs, na)
            tq = rew + nd * sac.discount * (torch.min(tq1, tq2) - self.alpha_rows(ids) * nlp)
        q1, q2 = self.q(self.pc, obs, act)
        cl = (q1 - tq).pow(2).mean((1, 2)) + (q2 - tq).pow(2).mean((1, 2))
        self.o_critic.zero_grad(set_to_none=True)
        cl.sum().backward(inputs=list(self.pc.values()))
        self.o_critic.step()
        mu, ls = self.actor(obs)
        n2 = torch.stack([torch.randn(B, ACTION_DIM, generator=g, device=DEV) for g in self.agen])
        action, log_pi = self.squash(mu, ls, n2)
        aq1, aq2 = self.q({k: v.detach() for k, v in self.pc.items()}, obs, action)
        alpha = self.alpha_rows(ids)
        al = (alpha.detach() * log_pi - torch.min(aq1, aq2)).mean((1, 2)) \
            + (alpha * (-log_pi - self.a0.target_entropy).detach()).mean((1, 2))
        self.o_actor.zero_grad(set_to_none=True)
        self.o_alpha.zero_grad(set_to_none=True)
        al.sum().backward(inputs=[*(self.pa[k] for k in self.actor_keys), self.la])
        self.o_actor.step()
        self.o_alpha.step()
        with torch.no_grad():
            qk = [k for k in self.pt if k.startswith(("q1.", "q2."))]
            torch._foreach_lerp_([self.pt[k] for k in qk], [self.pc[k] for k in qk], sac.tau)


def runner(group: Group):
    """The group's step, captured after three eager ones on CUDA (as the loop's update is)."""
    if not GRAPH:
        return group.step
    from ptsl.core.cuda.graph import CudaBackend
    be = CudaBackend(DEV)
    for _ in range(3):
        be.eager(group.step)
    graph = be.capture(group.step, group.gens)
    graph.replay()
    return graph.replay


def timed(fn, n):
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n


def main() -> None:
    print(f"{EXP} on {DEV} ({torch.cuda.get_device_name() if GRAPH else 'cpu'}), torch "
          f"{torch.__version__}, batch {B}, captured {GRAPH}, group "
          f"{'by hand' if HAND else 'vmapped'}", flush=True)
    for S in SIZES:
        al = alone(S)
        gr = HandGroup(S) if HAND else Group(S)
        go = runner(gr)
        warm = 4  # alone: three eager updates and the capture happen here
        for _ in range(warm):
            for _, _, u in al:
                u()
        for _ in range(0 if GRAPH else warm):  # on CUDA runner() made four updates already
            go()
        # Same batches and noise so far (same generators, seeds, rows): compare the weights.
        worst = 0.0
        for s, (a, _, _) in enumerate(al):
            for k, p in a.critic.named_parameters():
                d = (p.detach() - gr.pc[k][s].detach()).abs().max().item()
                worst = max(worst, d / (p.detach().abs().max().item() + 1e-12))
            for k, p in a.actor.named_parameters():
                d = (p.detach() - gr.pa[k][s].detach()).abs().max().item()
                worst = max(worst, d / (p.detach().abs().max().item() + 1e-12))
        n = 200 if GRAPH else 3
        ta, tg = [], []
        for _ in range(3):  # interleaved, the median of three
            ta.append(timed(lambda: [u() for _, _, u in al], n))
            tg.append(timed(go, n))
        ta, tg = sorted(ta)[1], sorted(tg)[1]
        print(f"S={S:2d}: alone {1e3 * ta:7.3f} ms per update of all seeds "
              f"({1e3 * ta / S:6.3f} per seed), group {1e3 * tg:7.3f} ms ({1e3 * tg / S:6.3f} per "
              f"seed): group {ta / tg:4.2f}x; after 4 updates the largest relative weight "
              f"difference {worst:.1e}", flush=True)
        del al, gr, go
        if GRAPH:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
