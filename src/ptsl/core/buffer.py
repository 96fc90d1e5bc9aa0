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


class DeviceReplayBuffer:
    """The replay buffer on the training device (CUDA), with :class:`ReplayBuffer`'s interface.

    A vector step's rows reach the device in one small copy (packed into one float32 block),
    and batches are drawn there from the buffer's own device generator, so no batch crosses the
    host-device bus and nothing waits for the host. Sampling is uniform with replacement over
    the stored rows, as in :class:`ReplayBuffer`; the ``rng`` argument of :meth:`sample` is not
    used (indices come from the device generator, seeded from the run's seed).
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int,
                 device: torch.device | str, seed: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity, self.obs_dim, self.action_dim = capacity, obs_dim, action_dim
        self.device = torch.device(device)
        width = 2 * obs_dim + action_dim + 3  # obs, action, reward, next_obs, not_done, task
        self.data = torch.empty((capacity, width), dtype=torch.float32, device=self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.pos = 0
        self.full = False
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

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            not_done: np.ndarray, task: np.ndarray) -> None:
        """Append a batch of transitions (one row each), wrapping around when full."""
        n = len(obs)
        block = np.concatenate([np.asarray(obs, np.float32), np.asarray(action, np.float32),
                                np.asarray(reward, np.float32).reshape(n, 1),
                                np.asarray(next_obs, np.float32),
                                np.asarray(not_done, np.float32).reshape(n, 1),
                                np.asarray(task, np.float32).reshape(n, 1)], axis=1)
        if n > self.capacity:
            block, n = block[n - self.capacity:], self.capacity
        rows = torch.from_numpy(block).to(self.device, non_blocking=True)
        idx = (self.pos + torch.arange(n, device=self.device)) % self.capacity
        self.data.index_copy_(0, idx, rows)
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = int((self.pos + n) % self.capacity)
        self.size_t.fill_(len(self))

    def sample(self, batch_size: int, rng: np.random.Generator | None = None,
               device: torch.device | str | None = None) -> Batch:
        """Uniformly sample ``batch_size`` stored transitions (with replacement) on the device."""
        size = len(self)
        if size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = torch.randint(0, size, (batch_size,), generator=self.generator, device=self.device)
        return self.fields(self.data.index_select(0, idx))

    def fields(self, rows: torch.Tensor) -> Batch:
        """The fields of packed ``rows`` (a selection of :attr:`data`), as column views."""
        c = self._cols
        return Batch(obs=rows[:, c["obs"]], action=rows[:, c["action"]],
                     reward=rows[:, c["reward"]], next_obs=rows[:, c["next_obs"]],
                     not_done=rows[:, c["not_done"]], task=rows[:, c["task"]].squeeze(1).long())

    def state_dict(self) -> dict:
        """The stored rows as host arrays (the format of :meth:`ReplayBuffer.state_dict`) and the
        sampling generator's state."""
        n = len(self)
        rows = self.data[:n].cpu().numpy()
        out = {"capacity": self.capacity, "pos": self.pos, "full": self.full,
               "generator": self.generator.get_state()}
        for name, cols in self._cols.items():
            out[name] = rows[:, cols].copy()
        out["task"] = out["task"][:, 0].astype(np.int64)
        return out

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity mismatch: checkpoint {state['capacity']}, "
                             f"config {self.capacity}")
        n = len(state["obs"])
        block = np.concatenate([state["obs"], state["action"],
                                np.asarray(state["reward"], np.float32).reshape(n, 1),
                                state["next_obs"],
                                np.asarray(state["not_done"], np.float32).reshape(n, 1),
                                np.asarray(state["task"], np.float32).reshape(n, 1)], axis=1)
        self.data[:n] = torch.from_numpy(block).to(self.device)
        self.pos, self.full = int(state["pos"]), bool(state["full"])
        self.size_t.fill_(len(self))
        if "generator" in state:
            self.generator.set_state(state["generator"])
        self.state_version += 1


def make_buffer(capacity: int, obs_dim: int, action_dim: int, device: torch.device,
                seed: int, on_device: bool) -> ReplayBuffer | DeviceReplayBuffer:
    """The run's replay buffer: on ``device`` when the update samples there (the static step,
    :meth:`ptsl.core.runtime.Runtime.runs_static_step`), else on the host."""
    if on_device:
        return DeviceReplayBuffer(capacity, obs_dim, action_dim, device, seed)
    return ReplayBuffer(capacity, obs_dim, action_dim)
