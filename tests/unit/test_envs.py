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


def _rollout(env, goal, seed: int = 3) -> list[bytes]:
    """Two 150-step episodes of seeded random actions: every observation, reward and info."""
    env.seed(seed)
    env.max_path_length = 150
    env.set_task(goal)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(2):
        obs, _ = env.reset()
        out.append(obs.tobytes())
        for _ in range(150):
            obs, reward, _, _, info = env.step(rng.uniform(-1, 1, 4).astype(np.float32))
            out.append(obs.tobytes() + np.float64(reward).tobytes()
                       + repr(sorted(info.items())).encode())
    return out


def test_an_env_on_a_copied_model_steps_as_a_freshly_compiled_one(task_cache):
    """Each task's MuJoCo model is compiled once per process and copied for every env after the
    first (a stage's training and evaluation envs): the copy's transitions equal those of
    Meta-World's own class, which compiles its XML, bit for bit, for every MT10 task."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    from ptsl.core.envs import _compiled_model, model_sharing

    tasks = load_tasks("mt10", 1, task_cache)
    paths = set()
    for name, goals in zip(tasks.names, tasks.goals):
        plain = _rollout(ALL_V3_ENVIRONMENTS[name](reward_function_version="v1"), goals[0])
        first = model_sharing(ALL_V3_ENVIRONMENTS[name])(reward_function_version="v1")
        second = model_sharing(ALL_V3_ENVIRONMENTS[name])(reward_function_version="v1")
        assert first.model is not second.model  # each its own copy: Meta-World edits its model
        assert first.model is not _compiled_model(first.fullpath)
        assert _rollout(first, goals[0]) == plain, name
        assert _rollout(second, goals[0]) == plain, name
        paths.add(first.fullpath)
    # One compilation per XML file (the window and drawer tasks share theirs), none per env.
    assert len(paths) < len(tasks.names)
    assert _compiled_model.cache_info().currsize >= len(paths)


def test_processes_that_need_the_same_task_list_build_it_once(tmp_path, monkeypatch):
    """Grid workers share the task cache: two loaders of one list at once build it once (the
    second waits for the first's file), and both get the same goals."""
    import threading

    from ptsl.core import envs

    built: list[str] = []
    real = envs._build_tasks

    def counted(benchmark, seed):
        built.append(benchmark)
        return real(benchmark, seed)

    monkeypatch.setattr(envs, "_build_tasks", counted)
    got: list = [None, None]

    def load(i: int) -> None:
        got[i] = load_tasks("reach-v3", 5, tmp_path)

    threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == ["reach-v3"]
    assert got[0].names == got[1].names == ("reach-v3",)
    assert [t.data for t in got[0].goals[0]] == [t.data for t in got[1].goals[0]]


def test_the_v1_observation_is_v3s_hand_objects_and_goal(task_cache):
    """``env.observation: v1`` gives the 12 numbers of Meta-World v1's layout, taken from the
    same state as the full 39: hand xyz, both objects' xyz, goal xyz (reference 1.1)."""
    tasks = load_tasks("mt10", 1, task_cache)
    full = MultiTaskVecEnv(tasks, EnvConfig(), seed=1, vector="sync")
    v1 = MultiTaskVecEnv(tasks, EnvConfig(observation="v1"), seed=1, vector="sync")
    try:
        assert (full.obs_dim, v1.obs_dim) == (39, 12)
        picked = [0, 1, 2, 4, 5, 6, 11, 12, 13, 36, 37, 38]
        np.testing.assert_array_equal(full.reset()[:, picked], v1.reset())
        rng = np.random.default_rng(3)
        for _ in range(5):
            action = full.sample_actions(rng)
            a, b = full.step(action), v1.step(action)
            np.testing.assert_array_equal(a.obs[:, picked], b.obs)
            np.testing.assert_array_equal(a.reward, b.reward)  # the layout changes no reward
        # Single-object tasks pad the second object with zeros, as v1 did.
        assert not b.obs[tasks.names.index("reach-v3"), 6:9].any()
    finally:
        full.close()
        v1.close()
