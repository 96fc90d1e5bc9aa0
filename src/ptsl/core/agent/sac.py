"""Multi-task SAC as mtrl implements it (reference 1.4 and 2): actor, twin critics, one
temperature per task, one update step and acting.

The method zoo (which encoder, task encoder and trunk) is decided in :mod:`ptsl.core.agent.builders`; this
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

from ..config import SACConfig
from ..errors import TrainingDiverged
from .buffer import Batch
from .nets.task_index import TaskIndex
from .optim import Adam


@contextlib.contextmanager
def one_cpu_thread(device: torch.device) -> Iterator[None]:
    """Compute on one CPU thread inside the block (nothing changes on another device).

    How MKL splits a product across threads, and so its last bits, depends on the thread count
    and on the CPU (products of 5 to 11 rows, as acting multiplies, on every CPU tried; products
    of a paper-size batch on an AVX-512 Xeon): on one thread the bits do not depend on either.
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


def _features(encoder: nn.Module, obs: torch.Tensor, task: TaskIndex,
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

    def forward(self, obs: torch.Tensor, task: TaskIndex, task_encoding: torch.Tensor | None,
                detach_encoder: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        h = _features(self.encoder, obs, task, task_encoding, detach_encoder,
                      self.concat_task_encoding)
        mu, raw_log_std = self.trunk(h, task, task_encoding).chunk(2, dim=-1)
        # Reference: log-std squashed into [min, max] by tanh rescaling, not clamped.
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (
            torch.tanh(raw_log_std) + 1)
        return mu, log_std


def to_host(t: torch.Tensor, blocking: bool) -> torch.Tensor:
    """``t`` copied to the host. On CUDA with ``blocking`` the thread first sleeps until the
    device has done the work queued before (an event made with ``cudaEventBlockingSync``)
    instead of polling for it, as a copy's own wait does, holding a core meanwhile: runs sharing
    a GPU wait most of the time, and their polling takes the cores their environments need
    (``PTSL_CUDA_WAIT``, :mod:`ptsl.core.runtime`). Only when the copy happens changes."""
    if blocking and t.device.type == "cuda":
        done = torch.cuda.Event(blocking=True)
        done.record()
        done.synchronize()
    return t.cpu()


def squashed_sample(mu: torch.Tensor, log_std: torch.Tensor, generator: torch.Generator | None,
                    with_log_prob: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Reparameterised tanh-Gaussian sample and its log-probability (mtrl ``actor.py``);
    ``with_log_prob=False`` (acting) skips the log-probability: the same sample, less work."""
    noise = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    return squash(mu, log_std, noise, with_log_prob)


def squash(mu: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor,
           with_log_prob: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`squashed_sample` with its standard-normal ``noise`` given (the update draws both
    of its noises first, in the reference's order: :meth:`MultiTaskSAC.draw_noise`)."""
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

    def forward(self, obs: torch.Tensor, action: torch.Tensor, task: TaskIndex,
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


def soft_update(src: nn.Module, dst: nn.Module, tau: float) -> None:
    """``dst <- (1 - tau) dst + tau src`` for every parameter, as one foreach call."""
    dst_params = list(dst.parameters())
    if dst_params:
        with torch.no_grad():
            torch._foreach_lerp_(dst_params, list(src.parameters()), tau)


#: Losses the divergence guard bounds from above (the reference aborts above 1e8); the others
#: only have to be finite.
GUARDED_LOSSES = ("critic_loss",)


def check_losses(history: Sequence[tuple[int, Mapping[str, torch.Tensor]]],
                 guard: float, blocking: bool = False) -> dict[str, float]:
    """Check the losses of recent updates and return their means on the host.

    ``history`` holds ``(step, losses)`` pairs in order. Raises :class:`TrainingDiverged` naming
    the first step and loss that is not finite or, for the critic loss, exceeds ``guard``. All
    values are read in one transfer, so calling this every N updates costs one device
    synchronisation per N updates instead of several per update (``blocking``: see
    :func:`to_host`).
    """
    if not history:
        return {}
    names = list(history[0][1])
    values = torch.stack([torch.stack([losses[n].detach().float() for n in names])
                          for _, losses in history])
    values = to_host(values, blocking)
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

    def __init__(self, nets: Networks, num_tasks: int, action_dim: int, sac: SACConfig,
                 generator: torch.Generator, meta: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.actor = nets.actor
        self.critic = nets.critic
        self.task_encoder = nets.task_encoder
        self.critic_target = copy.deepcopy(nets.critic)
        for p in self.critic_target.parameters():
            p.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.full((num_tasks,), math.log(sac.init_temperature)))
        self.target_entropy = -float(action_dim)
        self.sac = sac
        self.num_tasks = num_tasks
        self.action_dim = action_dim
        self.generator = generator
        self.meta = dict(meta or {})
        actor_params = nets.actor_params or list(nets.actor.trunk.parameters())
        self._actor_params = list(actor_params)
        #: How a batch's task ids become the :class:`TaskIndex` the networks select by (the CUDA
        #: path swaps in its static formulation, :func:`ptsl.core.cuda.accelerate`).
        self.task_index: type[TaskIndex] = TaskIndex
        #: Adam's options. fused: one kernel per optimiser step for all its tensors, on the CPU
        #: too (foreach falls back to one kernel per tensor and operation there, about a quarter
        #: of a small MT10 update); element-wise, so its bits do not depend on the thread count.
        #: capturable (step counters on the device) is switched on by the CUDA path before the
        #: first update.
        self.adam_options: dict[str, bool] = {"fused": True, "capturable": False}
        self._optimizers: dict[str, Adam] | None = None
        #: On CUDA, whether a result read on the host waits asleep (:func:`to_host`); the
        #: training loop sets it from ``PTSL_CUDA_WAIT``.
        self.blocking_wait = False
        #: Counts :meth:`load_training_state` calls: a captured update made before a load would
        #: keep updating the replaced optimizer moments, so it re-captures when this changes.
        self.state_version = 0

    @property
    def device(self) -> torch.device:
        return self.log_alpha.device

    def optimizers(self) -> dict[str, Adam]:
        """Adam for each parameter group (actor, critic, alpha, and task_encoder where there is
        one), built on first use: an agent loaded to act or evaluate never needs them.
        :class:`ptsl.core.agent.optim.Adam` is torch's Adam without torch.compile's import."""
        if self._optimizers is None:
            sac, adam = self.sac, self.adam_options
            if self.device.type == "meta":  # no fused kernel there (the GPU path's CPU tests)
                adam = {**adam, "fused": False, "foreach": True}
            opts = {"actor": Adam(self._actor_params, lr=sac.actor_lr, **adam),
                    "critic": Adam(self.critic.parameters(), lr=sac.critic_lr, **adam),
                    "alpha": Adam([self.log_alpha], lr=sac.alpha_lr, **adam)}
            if self.task_encoder is not None:
                opts["task_encoder"] = Adam(self.task_encoder.parameters(),
                                            lr=sac.task_encoder_lr, **adam)
            self._optimizers = opts
        return self._optimizers

    @property
    def actor_opt(self) -> Adam:
        return self.optimizers()["actor"]

    @property
    def critic_opt(self) -> Adam:
        return self.optimizers()["critic"]

    @property
    def alpha_opt(self) -> Adam:
        return self.optimizers()["alpha"]

    @property
    def task_encoder_opt(self) -> Adam | None:
        return self.optimizers().get("task_encoder")

    def encode_task(self, task: TaskIndex) -> torch.Tensor | None:
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
        task_i = self.task_index(torch.as_tensor(task_np, dtype=torch.int64, device=self.device),
                                 self.num_tasks)
        # No network here behaves differently in train() and eval() mode (no dropout, no batch
        # norm), so acting does not switch modes; that walk over every module costs as much as
        # the forward pass of a 10-row batch.
        with one_cpu_thread(self.device):
            mu, log_std = self.actor(obs_t, task_i, self.encode_task(task_i))
            action = torch.tanh(mu) if deterministic else \
                squashed_sample(mu, log_std, self.generator, with_log_prob=False)[0]
        out = to_host(action, self.blocking_wait).numpy()
        return out[0] if single else out

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One SAC update on ``batch`` in the reference order (reference 1.3, 2); returns the
        losses as 0-dim tensors on the agent's device.

        On a CPU it runs on one thread, whatever the process's thread count: how MKL splits a
        matrix product across threads, and so its last bits, depends on the thread count and
        on the kind of CPU (on an AVX-512 Xeon even batch-1280 products of every method;
        tests/unit/test_threads.py), and a run's bytes must not. One thread is also how the grid
        runs each stage, one per core.
        """
        with one_cpu_thread(self.device):
            return self._update(batch)

    def _update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """:meth:`update`'s work on the threads it is given: the critic step, then the actor's
        and the temperature's, then the targets and the task encoder.

        Nothing here reads a value back to the host: the environments step while it runs, a
        CUDA graph can capture it, and the training loop checks the losses once per episode
        (:func:`check_losses`; docs/differences.md).
        """
        task = self.task_index(batch.task, self.num_tasks)
        next_noise, noise = self.draw_noise(batch.obs.shape[0])
        if self.task_encoder_opt is not None:
            self.task_encoder_opt.zero_grad(set_to_none=True)
        critic_loss, enc_nograd = self.critic_loss(batch, task, next_noise)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        actor_loss, alpha_loss, log_pi = self.actor_losses(batch, task, enc_nograd, noise)
        # One backward for both: each loss reaches only its own parameters (the other's inputs
        # are detached) and the sum passes each gradient on unchanged, so the actor step and the
        # temperature step see the bits two backward passes gave, in one pass's overhead.
        self.actor_opt.zero_grad(set_to_none=True)
        self.alpha_opt.zero_grad(set_to_none=True)
        (actor_loss + alpha_loss).backward(inputs=[*self._actor_params, self.log_alpha])
        self.actor_opt.step()
        self.alpha_opt.step()
        self.finish_update()
        with torch.no_grad():
            return {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
                    "alpha_loss": alpha_loss.detach(), "alpha_mean": self.log_alpha.exp().mean(),
                    "entropy": -log_pi.detach().mean()}

    def alpha(self, task: TaskIndex) -> torch.Tensor:
        """Per-sample temperature, selected by task (shape B x 1)."""
        return task.entries(self.log_alpha.exp())

    def critic_loss(self, batch: Batch, task: TaskIndex, noise: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The twin critics' loss against the soft target (reference 1.3), and the task encoding
        detached for the actor's step (or None). The task encoding keeps its gradient here: the
        critic loss trains the task encoder."""
        sac = self.sac
        task_enc = self.encode_task(task)
        enc_nograd = None if task_enc is None else task_enc.detach()
        with torch.no_grad():
            mu, log_std = self.actor(batch.next_obs, task, enc_nograd)
            next_action, next_log_pi = squash(mu, log_std, noise)
            tq1, tq2 = self.critic_target(batch.next_obs, next_action, task, enc_nograd)
            target_v = torch.min(tq1, tq2) - self.alpha(task) * next_log_pi
            target_q = batch.reward + batch.not_done * sac.discount * target_v
        q1, q2 = self.critic(batch.obs, batch.action, task, task_enc)
        if sac.q_clip is not None:  # the published PaCo runs' clip, targets and predictions
            target_q = target_q.clamp(-sac.q_clip, sac.q_clip)
            q1, q2 = q1.clamp(-sac.q_clip, sac.q_clip), q2.clamp(-sac.q_clip, sac.q_clip)
        return F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q), enc_nograd

    def actor_losses(self, batch: Batch, task: TaskIndex, enc_nograd: torch.Tensor | None,
                     noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The actor's and the temperature's losses, and the sample's log-probability. The
        encoder output and the task encoding are detached (reference 4.4)."""
        mu, log_std = self.actor(batch.obs, task, enc_nograd, detach_encoder=True)
        action, log_pi = squash(mu, log_std, noise)
        aq1, aq2 = self.critic(batch.obs, action, task, enc_nograd, detach_encoder=True)
        alpha = self.alpha(task)
        actor_loss = (alpha.detach() * log_pi - torch.min(aq1, aq2)).mean()
        # As in reference 1.4: the loss is written on alpha = exp(log alpha), not on log alpha.
        alpha_loss = (alpha * (-log_pi - self.target_entropy).detach()).mean()
        return actor_loss, alpha_loss, log_pi

    def draw_noise(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The update's two standard-normal draws from the agent's generator, in the order the
        reference's update draws them (the next action's, then the action's)."""
        shape = (rows, self.action_dim)
        return tuple(torch.randn(shape, generator=self.generator, device=self.device)
                     for _ in range(2))

    def finish_update(self) -> None:
        """The end of an update, after the actor and temperature steps: the target networks
        follow the critic, and the task encoder steps on the gradients of the critic loss."""
        sac = self.sac
        soft_update(self.critic.q1, self.critic_target.q1, sac.tau)
        soft_update(self.critic.q2, self.critic_target.q2, sac.tau)
        soft_update(self.critic.encoder, self.critic_target.encoder, sac.encoder_tau)
        if self.task_encoder_opt is not None:
            self.task_encoder_opt.step()

    # ---------------------------------------------------------------- persistence
    def training_state(self) -> dict[str, Any]:
        """Weights, optimiser moments and the sampling generator: everything a resume needs."""
        return {"model": self.state_dict(),
                "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
                "generator": self.generator.get_state()}

    def load_training_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`training_state`; any captured update is re-captured before its next
        use (:attr:`state_version`).

        The optimisers keep this agent's :attr:`adam_options`: ``Optimizer.load_state_dict``
        would take them from the file (a checkpoint written with ``capturable`` on a GPU fails
        on a CPU, and the reverse breaks a capture), and Adam's step counters go where these
        options want them (on the host unless capturable).
        """
        self.state_version += 1
        self.load_state_dict(state["model"])
        for name, opt in self.optimizers().items():
            opt.load_state_dict(state["optimizers"][name])
            for group in opt.param_groups:
                group.update(self.adam_options)
                for p in group["params"]:
                    if "step" in opt.state.get(p, {}):
                        step = opt.state[p]["step"]
                        where = p.device if group["capturable"] else torch.device("cpu")
                        opt.state[p]["step"] = step.to(device=where, dtype=torch.float32)
        self.generator.set_state(state["generator"])

    def parameter_count(self) -> int:
        """Parameters by the reference rule: actor + critic + critic target + log-alpha, tied
        tensors counted in each module, the task encoder excluded (reference 5.6)."""
        return sum(sum(p.numel() for p in m.parameters())
                   for m in (self.actor, self.critic, self.critic_target)) + self.log_alpha.numel()

    def predict(self, obs: np.ndarray, task: np.ndarray | int,
                deterministic: bool = True) -> np.ndarray:
        """The familiar name for :meth:`act` (same arguments, same result). Unlike
        stable-baselines3's ``predict`` it returns the action(s) alone, not a tuple."""
        return self.act(obs, task, deterministic)
