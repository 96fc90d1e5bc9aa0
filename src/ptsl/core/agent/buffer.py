"""Preallocated replay buffer shared by all tasks (reference: one 1e6-transition ring buffer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch


@dataclass(frozen=True)
class Batch:
    """A sampled batch as tensors; ``task`` is the task index of each row (int64)."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    not_done: torch.Tensor
    task: torch.Tensor


class Ring:
    """The index arithmetic of a ring of ``capacity`` rows, which both replay buffers (this
    module's and :class:`ptsl.core.cuda.buffer.DeviceReplayBuffer`) store in: where the next row
    goes, whether it has wrapped around, how many rows it holds, and that part of its state."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.pos = 0  # next write index
        self.full = False

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def claim(self, n: int, arange: Callable[[int], Any] = np.arange) -> tuple[slice, Any]:
        """For ``n`` rows appended at once: the ones that survive (the newest ``capacity``) and
        the slots they go to, wrapping around, as an array of ``arange``'s kind (``np.arange``,
        or ``torch.arange`` on a device); the write position moves past them."""
        keep = slice(max(n - self.capacity, 0), n)
        n = keep.stop - keep.start
        idx = (self.pos + arange(n)) % self.capacity
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = int((self.pos + n) % self.capacity)
        return keep, idx

    def ring_state(self) -> dict:
        """The ring's part of a buffer's state: capacity, write position and whether it is full."""
        return {"capacity": self.capacity, "pos": self.pos, "full": self.full}

    def load_ring(self, state: dict) -> None:
        """Take the ring's part of ``state``, refused where its capacity is not this one's."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity mismatch: checkpoint {state['capacity']}, "
                             f"config {self.capacity}")
        self.pos, self.full = int(state["pos"]), bool(state["full"])


class ReplayBuffer(Ring):
    """Ring buffer of (obs, action, reward, next_obs, not_done, task), sampled uniformly.

    Sampling is uniform over the whole buffer, without per-task balancing, as in the reference.
    Randomness comes only from the generator passed to :meth:`sample`.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int) -> None:
        super().__init__(capacity)
        self.obs = np.empty((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.empty((capacity, obs_dim), dtype=np.float32)
        self.action = np.empty((capacity, action_dim), dtype=np.float32)
        self.reward = np.empty((capacity, 1), dtype=np.float32)
        self.not_done = np.empty((capacity, 1), dtype=np.float32)
        self.task = np.empty((capacity,), dtype=np.int64)

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            not_done: np.ndarray, task: np.ndarray) -> None:
        """Append a batch of transitions (one row each), wrapping around when full."""
        keep, idx = self.claim(len(obs))
        self.obs[idx] = obs[keep]
        self.action[idx] = action[keep]
        self.reward[idx, 0] = reward[keep]
        self.next_obs[idx] = next_obs[keep]
        self.not_done[idx, 0] = not_done[keep]
        self.task[idx] = task[keep]

    def sample(self, batch_size: int, rng: np.random.Generator,
               device: torch.device | str = "cpu") -> Batch:
        """Uniformly sample ``batch_size`` stored transitions (with replacement)."""
        size = len(self)
        if size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = rng.integers(0, size, size=batch_size)

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a[idx], device=device)

        return Batch(obs=t(self.obs), action=t(self.action), reward=t(self.reward),
                     next_obs=t(self.next_obs), not_done=t(self.not_done), task=t(self.task))

    def state_dict(self) -> dict:
        """The stored rows only (a resume checkpoint does not carry the empty part)."""
        n = len(self)
        return {**self.ring_state(),
                "obs": self.obs[:n].copy(), "action": self.action[:n].copy(),
                "reward": self.reward[:n].copy(), "next_obs": self.next_obs[:n].copy(),
                "not_done": self.not_done[:n].copy(), "task": self.task[:n].copy()}

    def load_state_dict(self, state: dict) -> None:
        self.load_ring(state)
        n = len(state["obs"])
        for name in ("obs", "action", "reward", "next_obs", "not_done", "task"):
            getattr(self, name)[:n] = state[name]
