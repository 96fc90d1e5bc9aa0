"""A seed group: several seeds of one experiment updated as one, each seed's bits as if alone.

Every seed keeps its own agent (weights, optimisers, temperatures, generator): checkpoints,
evaluation and saved models are the agent's own, as in a run of that seed alone. Only the
update is shared: the losses of :mod:`ptsl.core.agent.sac` (:func:`critic_loss`,
:func:`actor_losses`, one copy of the maths) run once for all seeds under ``torch.func.vmap``
over the seeds' weights stacked on a leading axis, and one backward gives every seed's
gradients; each agent then takes its own optimiser steps and target update on its slice.

Why each seed keeps its bits (tests/unit/test_group.py compares every tensor with the seeds'
own updates):

- the products go through :func:`ptsl.core.agent.nets.mlp.linear`, whose batched form
  sums as one seed's product does;
- the element-wise operations meet each seed's elements in the same vector loop as alone, and
  the reductions (means, sums over a row) run per seed's slice in the same order;
- Adam and the target update run on each agent's own tensors, so the kernels see one seed's
  element count (a stacked tensor would move elements between a vector loop's body and tail);
  each gradient is handed over in its parameter's layout, as autograd hands one seed's over
  (the batched product's weight gradient comes out transposed, and fused Adam walks memory);
- each seed's noise comes from its own generator in the order its update draws it.

Where the seeds batch: on the host path (the CPU loop) the task selections read counts on the
host (:class:`~ptsl.core.agent.nets.task_index.TaskIndex`), which ``vmap`` cannot batch, and only
the methods of :data:`GROUPED_METHODS` have no such selection: the others' seeds update one after
another (the same bits, no gain). On the device path (the agents' task index static, as the GPU
path sets it) every method batches; there MT-SAC keeps each seed's bits on CPU (multi-head SAC
and MT-SAC+PTSL too on the AVX-512 Xeons, not on an AMD EPYC), and the others agree with each
seed's own update to float rounding (their batched contractions sum in another order;
tests/unit/test_group.py), as a GPU's kernels do anyway.

On a CPU the seeds go through their networks as one only where this host's batched product
keeps each seed's bits at every Linear's shape (:meth:`SeedGroup.as_one`, asked once per row
count): true on the AVX-512 Intel Xeons the groups were built on, false on an AVX2-only AMD
EPYC, whose batched weight gradient of a layer with few outputs sums in another order. There
the seeds act and update in turn: the same bits as alone, without the group's speed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.func import vmap

from .buffer import Batch
from .nets.mlp import Linear, batched_keeps_bits
from .sac import (LossNets, MultiTaskSAC, actor_losses, critic_loss, one_cpu_thread,
                  squashed_sample, to_host, update_losses)

#: Methods whose update a group runs as one (each tested seed by seed against its own update).
GROUPED_METHODS = frozenset({"mtsac"})


def groupable(method: str, static_index: bool = False) -> bool:
    """Whether seeds of ``method`` update as one (else one after another, the same bits):
    every method with static task selections (the device path), else :data:`GROUPED_METHODS`."""
    return static_index or method in GROUPED_METHODS


def _stack(module: torch.nn.Module | None, agents: Sequence[MultiTaskSAC], attr: str,
           grad: bool) -> tuple[dict, dict]:
    """The parameters and buffers of every agent's ``attr`` module stacked on a leading seed
    axis (copies; leaves that require grad when ``grad``)."""
    if module is None:
        return {}, {}
    mods = [getattr(a, attr) for a in agents]
    params = [dict(m.named_parameters()) for m in mods]
    buffers = [dict(m.named_buffers()) for m in mods]
    return ({n: torch.stack([p[n].detach() for p in params]).requires_grad_(grad)
             for n in params[0]},
            {n: torch.stack([b[n] for b in buffers]) for n in buffers[0]})


def _slots(module: torch.nn.Module) -> dict[str, tuple[torch.nn.Module, str, str]]:
    """Each parameter's and buffer's name (as ``named_parameters()`` / ``named_buffers()`` give
    it, once per tensor) -> the module that holds it, the attribute and which table."""
    out = {}
    for table, named in (("_parameters", module.named_parameters),
                         ("_buffers", module.named_buffers)):
        for name, _ in named():
            owner, _, attr = name.rpartition(".")
            out[name] = (module.get_submodule(owner), attr, table)
    return out


def _call(module: torch.nn.Module, slots: dict, values: dict, args: tuple, kwargs: dict):
    """``module(*args, **kwargs)`` with its tensors replaced by ``values`` (by name), then
    restored. As ``torch.func.functional_call``, but each tensor is swapped once in the module
    that holds it: a projection shared across layers (PTSL) has several names, and
    functional_call's tying restores the aliases in an order that leaves the batched tensors in
    the module."""
    saved = []
    try:
        for name, value in values.items():
            owner, attr, table = slots[name]
            held = getattr(owner, table)
            saved.append((held, attr, held[attr]))
            held[attr] = value
        return module(*args, **kwargs)
    finally:
        for held, attr, original in reversed(saved):
            held[attr] = original


def _update_settings(meta: dict) -> dict:
    """What an agent's update depends on besides its seed: its experiment, SAC settings, sizes
    and tasks (not the training schedule or the environment's settings)."""
    config = meta.get("config", {})
    return {**{k: v for k, v in meta.items() if k != "config"},
            "experiment": config.get("experiment"), "sac": config.get("sac")}


class SeedGroup:
    """The agents of several seeds of one experiment, updated as one (module docstring)."""

    def __init__(self, agents: Sequence[MultiTaskSAC]) -> None:
        if not agents:
            raise ValueError("a seed group needs at least one agent")
        self.agents = list(agents)
        first = self.agents[0]
        for a in self.agents[1:]:
            if _update_settings(a.meta) != _update_settings(first.meta):
                raise ValueError("a seed group's agents must share their experiment: the same "
                                 "method, sizes, SAC settings and tasks")
        self.template = first
        self._slots = {id(m): _slots(m) for m in (first.actor, first.critic,
                                                     first.critic_target, first.task_encoder)
                         if m is not None}
        #: Whether the update runs as one for all seeds (:func:`groupable`); if not, each
        #: agent updates alone in turn.
        self.static = all(a.task_index.static for a in self.agents)
        self.batched = groupable(first.meta.get("config", {}).get("experiment", {})
                                 .get("method", ""), static_index=self.static)
        self._keeps_bits: dict[int, bool] = {}  # rows -> this CPU's answer (:meth:`as_one`)

    def as_one(self, rows: int) -> bool:
        """Whether inputs of ``rows`` rows go through the seeds' networks as one: a batched
        group, and on a CPU only where this host's batched products keep each seed's bits at
        every Linear's shape (:func:`~ptsl.core.agent.nets.mlp.batched_keeps_bits`, asked once
        per row count); elsewhere the seeds act and update in turn, with the same bits."""
        if not self.batched:
            return False
        t = self.template
        if t.device.type != "cpu":
            return True
        if rows not in self._keeps_bits:
            shapes = [tuple(m.weight.shape) for net in (t.actor, t.critic, t.task_encoder)
                      if net is not None for m in net.modules() if isinstance(m, Linear)]
            with one_cpu_thread(t.device):
                self._keeps_bits[rows] = batched_keeps_bits(shapes, len(self.agents), rows)
        return self._keeps_bits[rows]

    def act(self, obs: Sequence[np.ndarray], tasks: Sequence[np.ndarray],
            deterministic: bool = False) -> list[np.ndarray]:
        """Every seed's actions for its (B, obs_dim) observations of its (B,) tasks, as the
        seed's own :meth:`MultiTaskSAC.act` gives them. On the device path (static task
        selections) one forward of all seeds' policies, each seed's noise drawn from its own
        generator, one read to the host; elsewhere each seed acts in turn (on a CPU a batched
        element-wise op would meet some of a seed's elements in another part of its vector
        loop than the seed's own small act does)."""
        if not (self.static and self.as_one(len(obs[0]))):
            return [a.act(o, t, deterministic) for a, o, t in zip(self.agents, obs, tasks)]
        t = self.template
        with torch.inference_mode(), one_cpu_thread(t.device):
            actor = _stack(t.actor, self.agents, "actor", grad=False)
            encoder = _stack(t.task_encoder, self.agents, "task_encoder", grad=False)
            obs_t = torch.as_tensor(np.stack(obs), dtype=torch.float32, device=t.device)
            task_t = torch.as_tensor(np.stack(tasks), dtype=torch.int64, device=t.device)

            def policy(actor, encoder, obs, task):
                task_i = t.task_index(task, t.num_tasks)
                nets = self._nets(actor, None, None, encoder, None)
                code = None if nets.task_encoder is None else nets.task_encoder(task_i)
                return nets.actor(obs, task_i, code)

            mu, log_std = vmap(policy)(actor, encoder, obs_t, task_t)
            actions = torch.tanh(mu) if deterministic else torch.stack(
                [squashed_sample(mu[s], log_std[s], a.generator, with_log_prob=False)[0]
                 for s, a in enumerate(self.agents)])
            out = to_host(actions, t.blocking_wait).numpy()
        return list(out)

    def update(self, batches: Sequence[Batch]) -> list[dict[str, torch.Tensor]]:
        """One update of every seed on its own batch; each seed's losses, as its
        :meth:`MultiTaskSAC.update` returns them."""
        if len(batches) != len(self.agents):
            raise ValueError(f"{len(self.agents)} seeds but {len(batches)} batches")
        if not self.as_one(batches[0].obs.shape[0]):
            return [a.update(b) for a, b in zip(self.agents, batches)]
        with one_cpu_thread(self.template.device):
            return self._update(batches)

    def _nets(self, actor, critic, target, encoder, log_alpha) -> LossNets:
        t = self.template

        def call(module, state):
            if state is None:
                return None
            slots = self._slots[id(module)]
            values = {**state[0], **state[1]}
            return lambda *args, **kwargs: _call(module, slots, values, args, kwargs)

        return LossNets(actor=call(t.actor, actor), critic=call(t.critic, critic),
                        critic_target=call(t.critic_target, target),
                        task_encoder=None if t.task_encoder is None else
                        call(t.task_encoder, encoder), log_alpha=log_alpha)

    def _update(self, batches: Sequence[Batch]) -> list[dict[str, torch.Tensor]]:
        agents, t = self.agents, self.template
        sac, rows = t.sac, batches[0].obs.shape[0]
        noise = [a.draw_noise(rows) for a in agents]
        fields = {f: torch.stack([getattr(b, f) for b in batches])
                  for f in ("obs", "action", "reward", "next_obs", "not_done", "task")}
        num_tasks, task_index = t.num_tasks, t.task_index

        # The critic's step: every module as it is now.
        actor = _stack(t.actor, agents, "actor", grad=False)
        critic = _stack(t.critic, agents, "critic", grad=True)
        target = _stack(t.critic_target, agents, "critic_target", grad=False)
        encoder = _stack(t.task_encoder, agents, "task_encoder", grad=True)
        log_alpha = torch.stack([a.log_alpha.detach() for a in agents])

        def critic_fn(actor, critic, target, encoder, log_alpha, batch, noise):
            task = task_index(batch["task"], num_tasks)
            nets = self._nets(actor, critic, target, encoder, log_alpha)
            return critic_loss(nets, Batch(**batch), task, noise, sac)

        enc_dim = None if t.task_encoder is None else 0  # no task encoding: None, not batched
        c_loss, enc_nograd = vmap(critic_fn, out_dims=(0, enc_dim))(actor, critic, target, encoder, log_alpha, fields,
                                             torch.stack([n[0] for n in noise]))
        trained = [*critic[0].values(), *encoder[0].values()]
        grads = torch.autograd.grad(c_loss.sum(), trained)
        names = [("critic", n) for n in critic[0]] + [("task_encoder", n) for n in encoder[0]]
        for s, a in enumerate(agents):
            params = {attr: dict(getattr(a, attr).named_parameters())
                      for attr in ("critic", "task_encoder") if getattr(a, attr) is not None}
            for (attr, name), g in zip(names, grads):
                params[attr][name].grad = g[s].contiguous()
            a.critic_opt.step()

        # The actor's and temperatures' step: the critic as its step left it.
        actor = _stack(t.actor, agents, "actor", grad=True)
        critic = _stack(t.critic, agents, "critic", grad=False)
        log_alpha = log_alpha.clone().requires_grad_(True)

        def actor_fn(actor, critic, log_alpha, batch, enc_nograd, noise):
            task = task_index(batch["task"], num_tasks)
            nets = self._nets(actor, critic, None, None, log_alpha)
            return actor_losses(nets, Batch(**batch), task, enc_nograd, noise, t.target_entropy)

        a_loss, alpha_loss, log_pi = vmap(actor_fn, in_dims=(0, 0, 0, 0, enc_dim, 0))(actor, critic, log_alpha, fields, enc_nograd,
                                                   torch.stack([n[1] for n in noise]))
        owned = {id(p) for p in t._actor_params}
        actor_names = [n for n, p in t.actor.named_parameters() if id(p) in owned]
        grads = torch.autograd.grad((a_loss + alpha_loss).sum(),
                                    [*(actor[0][n] for n in actor_names), log_alpha])
        out = []
        for s, a in enumerate(agents):
            params = dict(a.actor.named_parameters())
            for name, g in zip(actor_names, grads):
                params[name].grad = g[s].contiguous()
            a.log_alpha.grad = grads[-1][s].contiguous()
            a.actor_opt.step()
            a.alpha_opt.step()
            a.finish_update()
            with torch.no_grad():
                out.append(update_losses(c_loss[s], a_loss[s], alpha_loss[s], a.log_alpha,
                                         log_pi[s]))
        return out
