"""Replay buffer: storage, wrap-around, uniform sampling from stored rows, resume state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptsl.core.agent.buffer import ReplayBuffer


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


def _fill(buf, rng, n):
    buf.add(rng.normal(size=(n, 5)).astype(np.float32), rng.uniform(-1, 1, (n, 2)).astype(np.float32),
            rng.normal(size=n), rng.normal(size=(n, 5)).astype(np.float32),
            rng.integers(0, 2, n).astype(np.float32), rng.integers(0, 7, n))


def test_device_buffer_stores_what_the_host_buffer_stores():
    """The device-resident buffer (the GPU path), run here on the CPU device: same rows
    after wrapping around, interchangeable resume state, batches drawn only from stored rows
    and reproducible from its seed."""
    from ptsl.core.agent.buffer import ReplayBuffer
    from ptsl.core.cuda.buffer import DeviceReplayBuffer, DeviceSampler

    def sample(buf: DeviceReplayBuffer, n: int):
        idx = torch.zeros(n, dtype=torch.int64)
        DeviceSampler(buf, buf.generator).draw(idx)
        return buf.fields(buf.data.index_select(0, idx))

    host, dev = ReplayBuffer(50, 5, 2), DeviceReplayBuffer(50, 5, 2, "cpu", seed=3)
    for n in (7, 30, 20):  # 57 rows: wraps around
        _fill(host, np.random.default_rng(n), n)
        _fill(dev, np.random.default_rng(n), n)
    assert len(dev) == len(host) == 50 and dev.pos == host.pos == 7 and dev.full
    hs, ds = host.state_dict(), dev.state_dict()
    for key in ("obs", "action", "reward", "next_obs", "not_done", "task"):
        np.testing.assert_array_equal(ds[key], hs[key], err_msg=key)
        assert ds[key].dtype == hs[key].dtype and ds[key].shape == hs[key].shape, key
    batch = sample(dev, 64)
    assert batch.obs.shape == (64, 5) and batch.reward.shape == (64, 1)
    assert batch.task.dtype == torch.int64 and batch.not_done.shape == (64, 1)
    stored = {tuple(r) for r in hs["obs"].tolist()}
    assert all(tuple(r) in stored for r in batch.obs.tolist())
    again = DeviceReplayBuffer(50, 5, 2, "cpu", seed=3)
    again.load_state_dict(hs)  # a host buffer's checkpoint resumes on the device
    torch.testing.assert_close(again.data, dev.data)
    a, b = DeviceReplayBuffer(50, 5, 2, "cpu", seed=9), DeviceReplayBuffer(50, 5, 2, "cpu", seed=9)
    a.load_state_dict(ds)
    b.load_state_dict(ds)
    assert torch.equal(sample(a, 16).obs, sample(b, 16).obs)
    host2 = ReplayBuffer(50, 5, 2)
    host2.load_state_dict(ds)  # and back
    np.testing.assert_array_equal(host2.obs, host.obs)
