"""Multi-task SAC as mtrl implements it (reference doc 1.4 and 2): actor, twin critics, one
temperature per task, one update step and acting.

The method zoo (which encoder, task encoder and trunk) is decided in :mod:`ptsl.core.builders`; this
module only composes the pieces it is handed and applies the reference's gradient-flow rules:
the critic loss trains the critic, its encoder and the task encoder; the actor loss trains the
actor trunk only (encoder output and task encoding detached); the temperature loss trains log-alpha.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .buffer import Batch
from .errors import TrainingDiverged
from .nets.task_index import select_task_rows


@contextlib.contextmanager
def one_cpu_thread(device: torch.device) -> Iterator[None]:
    """Compute on one CPU thread inside the block (nothing changes on another device).

    Acting multiplies a few rows (one per task), and MKL sums products of 5 to 11 rows across
    threads, so on several threads their bits would depend on the thread count; on one they do
    not, and a product of so few rows gains nothing from more threads anyway.
    """
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _features(encoder: nn.Module, obs: torch.Tensor, task: torch.Tensor,
              task_encoding: torch.Tensor | None, detach: bool, concat: bool) -> torch.Tensor:
    """The encoder's output (detached for the actor step), with the task encoding appended
    where the method reads it."""
    h = encoder(obs, task, task_encoding)
    if detach:
        h = h.detach()
    return torch.cat([h, task_encoding], dim=-1) if concat else h


class Actor(nn.Module):
    """Encoder -> (features [+ task encoding]) -> trunk -> tanh-squashed Gaussian."""

    def __init__(self, encoder: nn.Module, trunk: nn.Module, concat_task_encoding: bool,
                 log_std_min: float, log_std_max: float) -> None:
        super().__init__()
        self.encoder = encoder
        self.trunk = trunk
        self.concat_task_encoding = concat_task_encoding
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max

    def forward(self, obs: torch.Tensor, task: torch.Tensor, task_encoding: torch.Tensor | None,
                detach_encoder: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        h = _features(self.encoder, obs, task, task_encoding, detach_encoder,
                      self.concat_task_encoding)
        mu, raw_log_std = self.trunk(h, task, task_encoding).chunk(2, dim=-1)
        # Reference: log-std squashed into [min, max] by tanh rescaling, not clamped.
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (
            torch.tanh(raw_log_std) + 1)
        return mu, log_std


def squashed_sample(mu: torch.Tensor, log_std: torch.Tensor, generator: torch.Generator | None,
                    with_log_prob: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Reparameterised tanh-Gaussian sample and its log-probability (mtrl ``actor.py``);
    ``with_log_prob=False`` (acting) skips the log-probability: the same sample, less work."""
    noise = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    pre = mu + noise * log_std.exp()
    action = torch.tanh(pre)
    if not with_log_prob:
        return action, None
    log_pi = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) \
        - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
    log_pi = log_pi - torch.log(F.relu(1 - action.pow(2)) + 1e-6).sum(-1, keepdim=True)
    return action, log_pi


class Critic(nn.Module):
    """Encoder -> (features [+ task encoding], action) -> two Q trunks."""

    def __init__(self, encoder: nn.Module, q1: nn.Module, q2: nn.Module,
                 concat_task_encoding: bool) -> None:
        super().__init__()
        self.encoder = encoder
        self.q1 = q1
        self.q2 = q2
        self.concat_task_encoding = concat_task_encoding

    def forward(self, obs: torch.Tensor, action: torch.Tensor, task: torch.Tensor,
                task_encoding: torch.Tensor | None,
                detach_encoder: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        h = _features(self.encoder, obs, task, task_encoding, detach_encoder,
                      self.concat_task_encoding)
        x = torch.cat([h, action], dim=-1)
        return self.q1(x, task, task_encoding), self.q2(x, task, task_encoding)


@dataclass
class Networks:
    """What a method builds: actor, critic and an optional task encoder.

    ``actor_params`` are the parameters the actor optimiser owns (the reference optimises the
    actor's trunk only; its encoder is tied to the critic's or left untrained).
    """

    actor: Actor
    critic: Critic
    task_encoder: nn.Module | None = None
    actor_params: list[nn.Parameter] = field(default_factory=list)


@dataclass(frozen=True)
class SACHyper:
    """The update-rule constants the agent needs (a view of :class:`ptsl.core.config.SACConfig`)."""

    discount: float
    init_temperature: float
    actor_lr: float
    critic_lr: float
    alpha_lr: float
    task_encoder_lr: float
    tau: float
    encoder_tau: float
    critic_loss_guard: float


def _soft_update(src: nn.Module, dst: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for p, tp in zip(src.parameters(), dst.parameters()):
            tp.lerp_(p, tau)


def _soft_update_foreach(src: nn.Module, dst: nn.Module, tau: float) -> None:
    """:func:`_soft_update` as one foreach call (the same lerp, element for element)."""
    dst_params = list(dst.parameters())
    if dst_params:
        with torch.no_grad():
            torch._foreach_lerp_(dst_params, list(src.parameters()), tau)


#: Losses the divergence guard bounds from above (the reference aborts above 1e8); the others
#: only have to be finite.
GUARDED_LOSSES = ("critic_loss",)


def check_losses(history: Sequence[tuple[int, Mapping[str, torch.Tensor]]],
                 guard: float) -> dict[str, float]:
    """Check the losses of recent updates and return their means on the host.

    ``history`` holds ``(step, losses)`` pairs in order. Raises :class:`TrainingDiverged` naming
    the first step and loss that is not finite or, for the critic loss, exceeds ``guard``. All
    values are read in one transfer, so calling this every N updates costs one device
    synchronisation per N updates instead of several per update.
    """
    if not history:
        return {}
    names = list(history[0][1])
    values = torch.stack([torch.stack([losses[n].detach().float() for n in names])
                          for _, losses in history]).cpu()
    limits = torch.tensor([guard if n in GUARDED_LOSSES else math.inf for n in names])
    bad = ~torch.isfinite(values) | (values > limits)
    if bool(bad.any()):
        row, col = (int(i) for i in bad.nonzero()[0])
        name, v = names[col], float(values[row, col])
        why = "is not finite" if not math.isfinite(v) else f"exceeds the guard {guard:g}"
        raise TrainingDiverged(f"training stopped at step {history[row][0]}: {name} = {v:g} {why}")
    return {n: float(m) for n, m in zip(names, values.double().mean(0))}


class MultiTaskSAC(nn.Module):
    """Multi-task SAC with disentangled (per-task) temperatures.

    Use :meth:`act` to act, :meth:`update` for one gradient step; :mod:`ptsl.core.persistence`
    saves and loads it. ``meta`` carries what is needed to rebuild the agent (config, sizes, task
    names).
    """

    def __init__(self, nets: Networks, num_tasks: int, action_dim: int, hp: SACHyper,
                 generator: torch.Generator, meta: Mapping[str, Any] | None = None,
                 capturable: bool = False) -> None:
        super().__init__()
        self.actor = nets.actor
        self.critic = nets.critic
        self.task_encoder = nets.task_encoder
        self.critic_target = copy.deepcopy(nets.critic)
        for p in self.critic_target.parameters():
            p.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.full((num_tasks,), math.log(hp.init_temperature)))
        self.target_entropy = -float(action_dim)
        self.hp = hp
        self.num_tasks = num_tasks
        self.action_dim = action_dim
        self.generator = generator
        self.meta = dict(meta or {})
        actor_params = nets.actor_params or list(nets.actor.trunk.parameters())
        self._actor_params = list(actor_params)
        self._capturable = capturable
        self._optimizers: dict[str, torch.optim.Adam] | None = None
        #: Run the update's fast path (see :meth:`update`); :mod:`ptsl.core.runtime` sets it.
        self.fast_path = True
        #: Task-indexed selections with static shapes (:meth:`set_static_shapes`).
        self.static_shapes = False
        #: Counts :meth:`load_training_state` calls: a captured update made before a load would
        #: keep updating the replaced optimizer moments, so it re-captures when this changes.
        self.state_version = 0

    @property
    def device(self) -> torch.device:
        return self.log_alpha.device

    def optimizers(self) -> dict[str, torch.optim.Adam]:
        """Adam for each parameter group (actor, critic, alpha, and task_encoder where there is
        one), built on first use: an agent loaded to act or evaluate never builds them, as
        building the first torch optimizer imports torch._dynamo (about two seconds)."""
        if self._optimizers is None:
            hp = self.hp
            # foreach Adam: one kernel per step for all tensors; on CPU the same bytes as the
            # loop. capturable (CUDA only): step counters on the device, so the step makes no
            # host read and a CUDA graph can capture it; set from the first update, never
            # switched.
            adam = dict(foreach=True, capturable=self._capturable)
            opts = {"actor": torch.optim.Adam(self._actor_params, lr=hp.actor_lr, **adam),
                    "critic": torch.optim.Adam(self.critic.parameters(), lr=hp.critic_lr, **adam),
                    "alpha": torch.optim.Adam([self.log_alpha], lr=hp.alpha_lr, **adam)}
            if self.task_encoder is not None:
                opts["task_encoder"] = torch.optim.Adam(self.task_encoder.parameters(),
                                                        lr=hp.task_encoder_lr, **adam)
            self._optimizers = opts
        return self._optimizers

    @property
    def actor_opt(self) -> torch.optim.Adam:
        return self.optimizers()["actor"]

    @property
    def critic_opt(self) -> torch.optim.Adam:
        return self.optimizers()["critic"]

    @property
    def alpha_opt(self) -> torch.optim.Adam:
        return self.optimizers()["alpha"]

    @property
    def task_encoder_opt(self) -> torch.optim.Adam | None:
        return self.optimizers().get("task_encoder")

    def set_static_shapes(self, on: bool) -> None:
        """Switch every task-indexed selection (PTSL's task layers, the task encoding, the
        temperature) between the CPU formulation and the static one that a GPU and a captured
        update need (:mod:`ptsl.core.nets.task_index`); the same values either way."""
        for module in self.modules():
            if hasattr(module, "static_shapes"):
                module.static_shapes = on

    def alpha(self, task: torch.Tensor) -> torch.Tensor:
        """Per-sample temperature, selected by task index (shape B x 1)."""
        if self.static_shapes:
            return select_task_rows(self.log_alpha.exp().unsqueeze(1), task, static=True)
        return self.log_alpha.exp()[task].unsqueeze(-1)  # P = 1: deterministic on CPU

    def encode_task(self, task: torch.Tensor) -> torch.Tensor | None:
        return None if self.task_encoder is None else self.task_encoder(task)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, task: np.ndarray | int, deterministic: bool = True) -> np.ndarray:
        """Action(s) for observation(s) ``obs`` of task(s) ``task``.

        ``obs`` is one observation (``obs_dim``,) or a batch (B, ``obs_dim``); ``task`` the
        matching task index or indices. Deterministic acting returns ``tanh(mean)``.
        """
        single = np.ndim(obs) == 1
        obs_np, task_np = np.atleast_2d(obs), np.atleast_1d(task)
        if task_np.size != obs_np.shape[0]:
            raise ValueError(f"got {obs_np.shape[0]} observations but {task_np.size} task indices")
        if task_np.min() < 0 or task_np.max() >= self.num_tasks:  # checked on the host: no sync
            raise ValueError(f"task index out of range [0, {self.num_tasks})")
        obs_t = torch.as_tensor(obs_np, dtype=torch.float32, device=self.device)
        task_t = torch.as_tensor(task_np, dtype=torch.int64, device=self.device)
        # No network here behaves differently in train() and eval() mode (no dropout, no batch
        # norm), so acting does not switch modes; that walk over every module cost as much as
        # the forward pass of a 10-row batch.
        with one_cpu_thread(self.device):
            mu, log_std = self.actor(obs_t, task_t, self.encode_task(task_t))
            action = torch.tanh(mu) if deterministic else \
                squashed_sample(mu, log_std, self.generator, with_log_prob=False)[0]
        out = action.cpu().numpy()
        return out[0] if single else out

    def fast_update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """:meth:`update` on the fast path whatever :attr:`fast_path` says: no host read, so a
        CUDA graph can capture it (:mod:`ptsl.core.update_step`)."""
        return self._update(batch, None, fast=True)

    def update(self, batch: Batch, step: int) -> dict[str, torch.Tensor]:
        """One SAC update on ``batch`` in the reference order; returns the losses (0-dim tensors).

        Plain path (``fast_path`` false): every loss is read on the host at once and the
        divergence guard stops before the step that would use it. Fast path: the same arithmetic
        run differently: the actor loss backpropagates into the actor's parameters only (the
        critic's weight gradients, which the plain path forms and then throws away at the next
        critic ``zero_grad``, are never computed), soft updates are one foreach call, and the
        losses stay on the device for :func:`check_losses` to read every few updates, so nothing
        waits for the device. Both paths give the same parameters (a test compares them).
        """
        return self._update(batch, step, fast=self.fast_path)

    def _update(self, batch: Batch, step: int | None, fast: bool) -> dict[str, torch.Tensor]:
        hp = self.hp
        task = batch.task
        if self.task_encoder_opt is not None:
            self.task_encoder_opt.zero_grad(set_to_none=True)
        task_enc = self.encode_task(task)  # with grad: the critic loss trains the task encoder
        enc_nograd = None if task_enc is None else task_enc.detach()

        with torch.no_grad():
            mu, log_std = self.actor(batch.next_obs, task, enc_nograd)
            next_action, next_log_pi = squashed_sample(mu, log_std, self.generator)
            tq1, tq2 = self.critic_target(batch.next_obs, next_action, task, enc_nograd)
            target_v = torch.min(tq1, tq2) - self.alpha(task) * next_log_pi
            target_q = batch.reward + batch.not_done * hp.discount * target_v
        q1, q2 = self.critic(batch.obs, batch.action, task, task_enc)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        if not fast:
            check_losses([(step, {"critic_loss": critic_loss})], hp.critic_loss_guard)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        # Actor and temperature: encoder output and task encoding detached (reference 4.4).
        mu, log_std = self.actor(batch.obs, task, enc_nograd, detach_encoder=True)
        action, log_pi = squashed_sample(mu, log_std, self.generator)
        aq1, aq2 = self.critic(batch.obs, action, task, enc_nograd, detach_encoder=True)
        alpha = self.alpha(task)
        actor_loss = (alpha.detach() * log_pi - torch.min(aq1, aq2)).mean()
        if not fast:
            check_losses([(step, {"actor_loss": actor_loss})], hp.critic_loss_guard)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward(inputs=self._actor_params if fast else None)
        self.actor_opt.step()
        # Reference quirk kept: the loss is written on alpha = exp(log alpha), not on log alpha.
        alpha_loss = (alpha * (-log_pi - self.target_entropy).detach()).mean()
        if not fast:
            check_losses([(step, {"alpha_loss": alpha_loss})], hp.critic_loss_guard)
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()

        soft_update = _soft_update_foreach if fast else _soft_update
        soft_update(self.critic.q1, self.critic_target.q1, hp.tau)
        soft_update(self.critic.q2, self.critic_target.q2, hp.tau)
        soft_update(self.critic.encoder, self.critic_target.encoder, hp.encoder_tau)
        if self.task_encoder_opt is not None:
            self.task_encoder_opt.step()
        with torch.no_grad():
            return {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
                    "alpha_loss": alpha_loss.detach(), "alpha_mean": self.log_alpha.exp().mean(),
                    "entropy": -log_pi.detach().mean()}

    # ---------------------------------------------------------------- persistence
    def training_state(self) -> dict[str, Any]:
        """Weights, optimiser moments and the sampling generator: everything a resume needs."""
        return {"model": self.state_dict(),
                "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
                "generator": self.generator.get_state()}

    def load_training_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`training_state`; any captured update is re-captured before its next
        use (:attr:`state_version`)."""
        self.state_version += 1
        self.load_state_dict(state["model"])
        opts = self.optimizers()
        for name, opt_state in state["optimizers"].items():
            opts[name].load_state_dict(opt_state)
        self.generator.set_state(state["generator"])

    def parameter_count(self) -> int:
        """Parameters by the reference rule: actor + critic + critic target + log-alpha, tied
        tensors counted in each module, the task encoder excluded (reference doc 5.6)."""
        return sum(sum(p.numel() for p in m.parameters())
                   for m in (self.actor, self.critic, self.critic_target)) + self.log_alpha.numel()

    def predict(self, obs: np.ndarray, task: np.ndarray | int,
                deterministic: bool = True) -> np.ndarray:
        """The familiar name for :meth:`act` (same arguments, same result). Unlike
        stable-baselines3's ``predict`` it returns the action(s) alone, not a tuple."""
        return self.act(obs, task, deterministic)
