"""Replay buffer: storage, wrap-around, uniform sampling from stored rows, resume state."""

from __future__ import annotations

import numpy as np
import pytest

from ptsl.buffer import ReplayBuffer


def _rows(n: int, start: int = 0, obs_dim: int = 3):
    ids = np.arange(start, start + n, dtype=np.float32)
    obs = np.repeat(ids[:, None], obs_dim, axis=1)
    return obs, np.stack([ids, -ids], 1), ids * 10, obs + 0.5, np.ones(n), (ids % 4).astype(np.int64)


def test_add_and_sample_keeps_rows_aligned():
    buf = ReplayBuffer(100, 3, 2)
    buf.add(*_rows(10))
    assert len(buf) == 10
    b = buf.sample(64, np.random.default_rng(0))
    ids = b.obs[:, 0]
    assert b.obs.shape == (64, 3) and b.action.shape == (64, 2) and b.reward.shape == (64, 1)
    assert (b.action[:, 0] == ids).all() and (b.reward[:, 0] == ids * 10).all()
    assert (b.next_obs[:, 0] == ids + 0.5).all() and (b.task == (ids % 4).long()).all()
    assert ids.max() < 10  # never samples unwritten rows


def test_wraparound_keeps_only_newest():
    buf = ReplayBuffer(8, 3, 2)
    for start in range(0, 20, 5):
        buf.add(*_rows(5, start))
    assert len(buf) == 8 and buf.full
    assert sorted(buf.obs[:, 0].tolist()) == list(range(12, 20))
    big = ReplayBuffer(4, 3, 2)
    big.add(*_rows(10))
    assert sorted(big.obs[:, 0].tolist()) == [6, 7, 8, 9]


def test_sampling_is_uniform_and_seeded():
    buf = ReplayBuffer(50, 3, 2)
    buf.add(*_rows(50))
    a = buf.sample(20000, np.random.default_rng(1)).obs[:, 0].numpy()
    b = buf.sample(20000, np.random.default_rng(1)).obs[:, 0].numpy()
    assert (a == b).all()
    counts = np.bincount(a.astype(int), minlength=50)
    assert counts.min() > 300 and counts.max() < 500  # expected 400 each


def test_state_dict_roundtrip():
    buf = ReplayBuffer(16, 3, 2)
    buf.add(*_rows(20))
    other = ReplayBuffer(16, 3, 2)
    other.load_state_dict(buf.state_dict())
    assert other.pos == buf.pos and other.full == buf.full
    np.testing.assert_array_equal(other.obs, buf.obs)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(8, 3, 2).load_state_dict(buf.state_dict())


def test_empty_buffer_refuses_to_sample():
    with pytest.raises(RuntimeError):
        ReplayBuffer(4, 3, 2).sample(2, np.random.default_rng(0))
