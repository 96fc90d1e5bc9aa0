"""The replay buffer on the training device, and the sampler that draws its batches there.

A vector step's rows reach the device in one small copy (packed into one float32 block), and
batches are drawn on the device from the buffer's own generator, so no batch crosses the
host-device bus and nothing waits for the host; a captured graph draws them at every replay.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..agent.buffer import Batch, Ring


class DeviceReplayBuffer(Ring):
    """:class:`ptsl.core.agent.buffer.ReplayBuffer` on a device: the same rows, interface and state
    format, sampled uniformly with replacement over the stored rows from a device generator
    seeded from the run's seed (:class:`DeviceSampler`)."""

    def __init__(self, capacity: int, obs_dim: int, action_dim: int,
                 device: torch.device | str, seed: int) -> None:
        super().__init__(capacity)
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = torch.device(device)
        width = 2 * obs_dim + action_dim + 3  # obs, action, reward, next_obs, not_done, task
        self.data = torch.empty((capacity, width), dtype=torch.float32, device=self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        #: len(self) on the device, updated in place: a captured sampler reads the current size
        #: at every replay, where a Python int would stay frozen at its value during capture.
        self.size_t = torch.zeros((), dtype=torch.int64, device=self.device)
        #: Counts :meth:`load_state_dict` calls (a captured sampler re-captures after one).
        self.state_version = 0
        o, a = obs_dim, action_dim
        self._cols = {"obs": slice(0, o), "action": slice(o, o + a), "reward": slice(o + a, o + a + 1),
                      "next_obs": slice(o + a + 1, 2 * o + a + 1),
                      "not_done": slice(2 * o + a + 1, 2 * o + a + 2),
                      "task": slice(2 * o + a + 2, 2 * o + a + 3)}

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            not_done: np.ndarray, task: np.ndarray) -> None:
        """Append a batch of transitions (one row each), wrapping around when full."""
        n = len(obs)
        block = np.concatenate([np.asarray(obs, np.float32), np.asarray(action, np.float32),
                                np.asarray(reward, np.float32).reshape(n, 1),
                                np.asarray(next_obs, np.float32),
                                np.asarray(not_done, np.float32).reshape(n, 1),
                                np.asarray(task, np.float32).reshape(n, 1)], axis=1)
        keep, idx = self.claim(n, functools.partial(torch.arange, device=self.device))
        self.data.index_copy_(0, idx, torch.from_numpy(block[keep]).to(self.device,
                                                                       non_blocking=True))
        self.size_t.fill_(len(self))

    def fields(self, rows: torch.Tensor) -> Batch:
        """The fields of packed ``rows`` (a selection of :attr:`data`), as column views."""
        c = self._cols
        return Batch(obs=rows[:, c["obs"]], action=rows[:, c["action"]],
                     reward=rows[:, c["reward"]], next_obs=rows[:, c["next_obs"]],
                     not_done=rows[:, c["not_done"]], task=rows[:, c["task"]].squeeze(1).long())

    def state_dict(self) -> dict:
        """The stored rows as host arrays (the format of
        :meth:`ptsl.core.agent.buffer.ReplayBuffer.state_dict`) and the sampling generator's state."""
        n = len(self)
        rows = self.data[:n].cpu().numpy()
        out = {**self.ring_state(), "generator": self.generator.get_state()}
        for name, cols in self._cols.items():
            out[name] = rows[:, cols].copy()
        out["task"] = out["task"][:, 0].astype(np.int64)
        return out

    def load_state_dict(self, state: dict) -> None:
        self.load_ring(state)
        n = len(state["obs"])
        block = np.concatenate([state["obs"], state["action"],
                                np.asarray(state["reward"], np.float32).reshape(n, 1),
                                state["next_obs"],
                                np.asarray(state["not_done"], np.float32).reshape(n, 1),
                                np.asarray(state["task"], np.float32).reshape(n, 1)], axis=1)
        self.data[:n] = torch.from_numpy(block).to(self.device)
        self.size_t.fill_(len(self))
        if "generator" in state:
            self.generator.set_state(state["generator"])
        self.state_version += 1


class DeviceSampler:
    """Uniform indices over the buffer's stored rows, drawn on its device with no host read:
    62 random bits modulo the size the buffer keeps on the device (the bias is below 2**-40 for
    any buffer that fits in memory). An empty buffer gives index 0 (never sampled by training,
    which updates only after its random steps), not a division by zero, which on a GPU is a
    device-side fault that would kill every process sharing it."""

    def __init__(self, buffer: DeviceReplayBuffer, generator: torch.Generator | None) -> None:
        self.buffer, self.generator = buffer, generator

    def draw(self, idx: torch.Tensor) -> None:
        torch.randint(0, 2**62, idx.shape, generator=self.generator, device=idx.device, out=idx)
        idx.remainder_(self.buffer.size_t.clamp_min(1))
