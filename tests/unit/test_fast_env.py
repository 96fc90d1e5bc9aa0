"""The fast step (ptsl.core.fast_env) against stock Meta-World, bit for bit, on all 50 tasks."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from metaworld.env_dict import ALL_V3_ENVIRONMENTS
from metaworld.policies import ENV_POLICY_MAP
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from metaworld.types import Task

from ptsl.core import fast_env
from ptsl.core.envs import metaworld_class

#: Steps of the scripted and of the random episode, each cut by Meta-World's own time limit.
SCRIPTED, RANDOM = 40, 12


def _goals(name: str, seeds: tuple[int, ...]) -> list[Task]:
    """Goals of task ``name`` drawn as Meta-World's benchmarks draw theirs (an environment
    reset with its random vector unfrozen, metaworld._make_tasks), one per seed, without the
    50 per task they draw (about 0.8 s a task)."""
    cls = ALL_V3_ENVIRONMENTS[name]
    env = metaworld_class(name, fast=False)()
    env._freeze_rand_vec, env.seeded_rand_vec, env._set_task_called = False, True, True
    goals = []
    for seed in seeds:
        env.seed(seed)
        env.reset()
        goals.append(Task(env_name=name, data=pickle.dumps(
            {"env_cls": cls, "rand_vec": env._last_rand_vec, "partially_observable": False})))
    env.close()
    return goals


def _same(a, b, where: str) -> None:
    assert type(a) is type(b), f"{where}: {type(a).__name__} against {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:  # numbers and arrays: the same dtype, shape and bytes (NaN included)
        x, y = np.asarray(a), np.asarray(b)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), \
            f"{where}: {a!r} against {b!r}"


@pytest.mark.parametrize("name", sorted(ALL_V3_ENVIRONMENTS))
def test_fast_step_equals_stock_meta_world_bit_for_bit(name):
    """Stock and fast environments under both reward versions step together: a scripted
    episode (contacts, grasps, actions beyond the action space), a reset onto another goal, a
    random episode; each
    ends at Meta-World's time limit (the truncation step, then the refusal to step on). Every
    reset's and step's return, info entry by entry, is the same object type and the same
    bytes, and so is the simulator's state."""
    pair = {}
    for version in ("v1", "v2"):
        for kind, fast in (("stock", False), ("fast", True)):
            env = metaworld_class(name, fast=fast)(reward_function_version=version)
            env.seed(7)
            pair[version, kind] = env
    envs = list(pair.values())
    policy = ENV_POLICY_MAP[name]()
    rng = np.random.default_rng(0)
    try:
        for goal, steps, scripted in zip(_goals(name, (1, 2)), (SCRIPTED, RANDOM),
                                         (True, False)):
            for env in envs:
                env.set_task(goal)
                env.max_path_length = steps
            out = [env.reset() for env in envs]
            for env, got in zip(envs, out):
                _same(out[0], got, f"{name} reset")
            obs = out[0][0]
            for t in range(steps):
                # the scripted policies' gains ask for more than the action space's [-1, 1]:
                # unclipped, they exercise the environment's own clipping
                action = (policy.get_action(obs.copy()) if scripted
                          else rng.uniform(-1, 1, 4)).astype(np.float32)
                for version in ("v1", "v2"):
                    stock = pair[version, "stock"].step(action)
                    fast = pair[version, "fast"].step(action)
                    _same(stock, fast, f"{name} {version} step {t}")
                    assert stock[3] == (t == steps - 1)  # the truncation step
                obs = stock[0]
            for env in envs:
                with pytest.raises(ValueError, match="reset the env"):
                    env.step(action)
        stock_data, fast_data = pair["v2", "stock"].data, pair["v2", "fast"].data
        for field in ("qpos", "qvel", "mocap_pos", "mocap_quat", "ctrl", "site_xpos"):
            _same(getattr(stock_data, field), getattr(fast_data, field), f"{name} {field}")
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("name", ["push-v3", "pick-place-v3"])
def test_contacts_read_as_arrays_equal_the_stock_walk(name):
    """``touching_object`` on the same states, stock method against fast, along the scripted
    policy until it grips the object (the pads' forces then positive): the same answer, and
    both answers occur."""
    env = metaworld_class(name)()
    env.set_task(_goals(name, (3,))[0])
    obs, _ = env.reset()
    policy = ENV_POLICY_MAP[name]()
    object_id = env._get_id_main_object()
    seen = set()
    try:
        for _ in range(120):
            stock = SawyerXYZEnv.touching_object(env, object_id)
            _same(stock, env.touching_object(object_id), name)
            seen.add(bool(stock))
            obs = env.step(np.clip(policy.get_action(obs.copy()), -1, 1).astype(np.float32))[0]
    finally:
        env.close()
    assert seen == {False, True}


def test_an_unchecked_meta_world_version_steps_stock_with_one_warning(monkeypatch, capsys):
    monkeypatch.setattr(fast_env, "version", lambda package: "3.2.0")
    fast_env.fast_enabled.cache_clear()
    fast_env.fast_class.cache_clear()
    try:
        cls = ALL_V3_ENVIRONMENTS["reach-v3"]
        assert fast_env.fast_class(cls) is cls
        assert fast_env.fast_class(ALL_V3_ENVIRONMENTS["push-v3"]) is ALL_V3_ENVIRONMENTS["push-v3"]
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["warning: metaworld 3.2.0 is installed; the fast step was checked against "
                       "3.1.1 only, so environments step as stock Meta-World does"]
    finally:
        monkeypatch.undo()
        fast_env.fast_enabled.cache_clear()
        fast_env.fast_class.cache_clear()
    assert fast_env.fast_class(ALL_V3_ENVIRONMENTS["reach-v3"]) is not \
        ALL_V3_ENVIRONMENTS["reach-v3"]
