"""The Meta-World protocol env on real Meta-World (single task and MT10 goal sets)."""

from __future__ import annotations


import numpy as np
import pytest

from ptsl.core.config import EnvConfig
from ptsl.core.envs import MultiTaskVecEnv, RewardNormalizer, load_tasks


@pytest.fixture(scope="module")
def reach(task_cache):
    return load_tasks("reach-v3", 1, task_cache)


def test_single_task_protocol(reach):
    cfg = EnvConfig(episode_length=20)
    env = MultiTaskVecEnv(reach, cfg, seed=1)
    try:
        assert env.num_tasks == 1 and env.obs_dim == 39 and env.action_dim == 4
        assert env.task_ids.tolist() == [0]
        rng = np.random.default_rng(0)
        first = env.reset()
        for t in range(20):
            res = env.step(env.sample_actions(rng))
            assert res.truncated == (t == 19)  # cut at episode_length, not Meta-World's 500
            assert not res.terminated.any()
        again = env.reset()
        np.testing.assert_array_equal(first, again)  # fixed goal: identical resets
        assert first.dtype == np.float32
    finally:
        env.close()


def test_goals_fixed_per_seed_and_resampled_on_request(reach):
    def goal(env):
        return env.reset()[0, -3:]

    a = MultiTaskVecEnv(reach, EnvConfig(), seed=1)
    b = MultiTaskVecEnv(reach, EnvConfig(), seed=1)
    r = MultiTaskVecEnv(reach, EnvConfig(goals="resample"), seed=1)
    try:
        np.testing.assert_array_equal(goal(a), goal(b))
        goals = {tuple(goal(r)) for _ in range(6)}
        assert len(goals) > 1
    finally:
        for e in (a, b, r):
            e.close()


def test_reward_normaliser_matches_reference_formula():
    norm = RewardNormalizer(alpha=0.1)
    mean, var = 0.0, 1.0
    for r in [1.0, 5.0, -2.0, 10.0]:
        mean = 0.9 * mean + 0.1 * r
        var = 0.9 * var + 0.1 * (r - mean) ** 2
        assert norm(r) == pytest.approx(r / (np.sqrt(var) + 1e-8))


def test_normalised_and_raw_rewards_and_state_roundtrip(reach):
    env = MultiTaskVecEnv(reach, EnvConfig(reward_alpha=0.5, reward_version="v2"), seed=1)
    try:
        env.reset()
        rng = np.random.default_rng(0)
        for _ in range(5):
            res = env.step(env.sample_actions(rng))
        assert res.raw_reward[0] != pytest.approx(res.reward[0])
        state = env.get_state()
        assert state[0]["reward_var"] != 1.0
        fresh = MultiTaskVecEnv(reach, EnvConfig(reward_alpha=0.5, reward_version="v2"), seed=1)
        fresh.set_state(state)
        assert fresh.get_state()[0]["reward_var"] == state[0]["reward_var"]
        fresh.close()
    finally:
        env.close()


def test_async_gives_the_sync_transitions_bit_for_bit(task_cache):
    """Why the vector mode is the machine's choice (PTSL_VECTOR), not a param: every MT10 task
    in its own process gives the same transitions, to the last bit, across an episode end and a
    reset, as all of them stepped in this process."""
    mt10 = load_tasks("mt10", 1, task_cache)
    cfg = EnvConfig(episode_length=3)
    sync = MultiTaskVecEnv(mt10, cfg, seed=2, vector="sync")
    asyn = MultiTaskVecEnv(mt10, cfg, seed=2, vector="async")
    try:
        np.testing.assert_array_equal(sync.reset(), asyn.reset())
        actions = np.random.default_rng(0).uniform(-1, 1, size=(5, 10, 4)).astype(np.float32)
        for i, a in enumerate(actions):
            rs, ra = sync.step(a), asyn.step(a)
            for field in ("obs", "reward", "terminated", "success", "raw_reward"):
                np.testing.assert_array_equal(getattr(rs, field), getattr(ra, field), field)
            assert rs.truncated == ra.truncated == (i == 2)
            if rs.truncated:
                np.testing.assert_array_equal(sync.reset(), asyn.reset())
        assert [s["reward_var"] for s in sync.get_state()] == \
            [s["reward_var"] for s in asyn.get_state()]
    finally:
        sync.close()
        asyn.close()


def test_sync_step_in_this_thread_equals_step_through_the_worker(reach):
    """``step`` runs sync sub-environments in the caller's thread, ``step_async``/``step_wait``
    in the worker thread (to overlap the update): the same transitions, bit for bit."""
    cfg = EnvConfig(episode_length=4)
    direct = MultiTaskVecEnv(reach, cfg, seed=3, vector="sync")
    worker = MultiTaskVecEnv(reach, cfg, seed=3, vector="sync")
    try:
        np.testing.assert_array_equal(direct.reset(), worker.reset())
        for a in np.random.default_rng(1).uniform(-1, 1, size=(9, 1, 4)).astype(np.float32):
            rd = direct.step(a)
            worker.step_async(a)
            rw = worker.step_wait()
            for field in ("obs", "reward", "terminated", "success", "raw_reward"):
                np.testing.assert_array_equal(getattr(rd, field), getattr(rw, field))
            assert rd.truncated == rw.truncated
            if rd.truncated:
                np.testing.assert_array_equal(direct.reset(), worker.reset())
        worker.step_async(a)
        with pytest.raises(RuntimeError, match="pending"):
            worker.step(a)
        worker.step_wait()
    finally:
        direct.close()
        worker.close()


def test_mt10_one_subenv_per_task(task_cache):
    tasks = load_tasks("mt10", 1, task_cache)
    assert tasks.num_tasks == 10 and tasks.names[0] == "reach-v3"
    assert all(len(g) == 50 for g in tasks.goals)
    cached = load_tasks("mt10", 1, task_cache)  # second call reads the cache
    assert cached.names == tasks.names
