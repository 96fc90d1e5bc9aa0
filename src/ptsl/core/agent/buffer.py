"""Preallocated replay buffer shared by all tasks (reference: one 1e6-transition ring buffer)."""

from __future__ import annotations

from dataclasses import dataclass

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


class ReplayBuffer:
    """Ring buffer of (obs, action, reward, next_obs, not_done, task), sampled uniformly.

    Sampling is uniform over the whole buffer, without per-task balancing, as in the reference.
    Randomness comes only from the generator passed to :meth:`sample`.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.obs = np.empty((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.empty((capacity, obs_dim), dtype=np.float32)
        self.action = np.empty((capacity, action_dim), dtype=np.float32)
        self.reward = np.empty((capacity, 1), dtype=np.float32)
        self.not_done = np.empty((capacity, 1), dtype=np.float32)
        self.task = np.empty((capacity,), dtype=np.int64)
        self.pos = 0  # next write index
        self.full = False

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            not_done: np.ndarray, task: np.ndarray) -> None:
        """Append a batch of transitions (one row each), wrapping around when full."""
        n = len(obs)
        if n > self.capacity:  # only the newest `capacity` rows can survive
            sl = slice(n - self.capacity, n)
            obs, action, reward, next_obs, not_done, task = (
                obs[sl], action[sl], reward[sl], next_obs[sl], not_done[sl], task[sl])
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx] = obs
        self.action[idx] = action
        self.reward[idx, 0] = reward
        self.next_obs[idx] = next_obs
        self.not_done[idx, 0] = not_done
        self.task[idx] = task
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = int((self.pos + n) % self.capacity)

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
        return {"capacity": self.capacity, "pos": self.pos, "full": self.full,
                "obs": self.obs[:n].copy(), "action": self.action[:n].copy(),
                "reward": self.reward[:n].copy(), "next_obs": self.next_obs[:n].copy(),
                "not_done": self.not_done[:n].copy(), "task": self.task[:n].copy()}

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity mismatch: checkpoint {state['capacity']}, "
                             f"config {self.capacity}")
        n = len(state["obs"])
        for name in ("obs", "action", "reward", "next_obs", "not_done", "task"):
            getattr(self, name)[:n] = state[name]
        self.pos, self.full = int(state["pos"]), bool(state["full"])
