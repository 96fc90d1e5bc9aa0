"""Meta-World multi-task vector environment under the reference protocol (reference 1.1).

One sub-environment per task, each with its own goal (fixed for the run and drawn from the seed,
or resampled at every reset), episodes cut at ``episode_length`` steps, rewards divided by a
running standard deviation like mtenv's ``NormalizedEnvWrapper``, and the task index delivered
with every observation. Sub-environments step in this process (``sync``) or in worker processes
(``async``) through gymnasium's vector environments: the same transitions either way (a test
compares them), so the mode is the machine's choice (``PTSL_VECTOR``, :mod:`ptsl.core.runtime`).
"""

from __future__ import annotations

import copy
import fcntl
import functools
import pickle
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from .config import EnvConfig
from .errors import EnvCheckError
from .files import write_atomic


@dataclass(frozen=True)
class TaskSet:
    """The tasks of a benchmark: names in benchmark order and each one's Meta-World goals."""

    benchmark: str
    names: tuple[str, ...]
    goals: tuple[tuple[Any, ...], ...]  # per task: the benchmark's list of metaworld.Task

    @property
    def num_tasks(self) -> int:
        return len(self.names)


#: Format of the task cache's files, part of their names: a pickle names the module of every
#: class in it, so a file written before a class moved is rebuilt, not misread.
TASK_CACHE_FORMAT = 2


def load_tasks(benchmark: str, seed: int, cache_dir: Path | None = None) -> TaskSet:
    """Build (or read from ``cache_dir``) the goal lists of ``benchmark`` for ``seed``.

    ``metaworld.MT50()`` spends about 20 s generating goals; they are a pure function of the
    Meta-World version, the benchmark and the seed, so they are cached on disk.
    """
    if cache_dir is None:
        return _build_tasks(benchmark, seed)
    cache = task_cache_file(benchmark, seed, cache_dir)
    if cache.is_file():
        return pickle.loads(cache.read_bytes())
    cache.parent.mkdir(parents=True, exist_ok=True)
    # Parallel grid workers share this cache: the first to need a list builds it while the
    # others wait for it (an MT50 list costs about 40 s of a core), then read it.
    with open(cache.with_name(cache.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.is_file():
            return pickle.loads(cache.read_bytes())
        tasks = _build_tasks(benchmark, seed)
        write_atomic(cache, pickle.dumps(tasks), "task cache")
    return tasks


def task_cache_file(benchmark: str, seed: int, cache_dir: Path) -> Path:
    """Where :func:`load_tasks` keeps the goal lists of ``benchmark`` for ``seed``."""
    version = _package_version("metaworld")
    return Path(cache_dir) / f"{benchmark}-seed{seed}-mw{version}-f{TASK_CACHE_FORMAT}.pkl"


def _build_tasks(benchmark: str, seed: int) -> TaskSet:
    import metaworld

    if benchmark == "mt10":
        bench = metaworld.MT10(seed=seed)
    elif benchmark == "mt50":
        bench = metaworld.MT50(seed=seed)
    else:
        bench = metaworld.MT1(benchmark, seed=seed)
    names = tuple(bench.train_classes)
    goals = tuple(tuple(t for t in bench.train_tasks if t.env_name == n) for n in names)
    return TaskSet(benchmark=benchmark, names=names, goals=goals)


@functools.lru_cache(maxsize=None)
def _compiled_model(path: str) -> Any:
    """The MuJoCo model of ``path``, compiled once per process: a stage builds each task twice
    (its training and its evaluation environment), and compiling costs about 0.1 s a task where
    a copy costs a tenth of that. Kept pristine: environments get copies."""
    import mujoco

    return mujoco.MjModel.from_xml_path(path)


def _initialize_from_compiled(self) -> tuple[Any, Any]:
    # gymnasium's MujocoEnv._initialize_simulation (gymnasium 1.x) on a copy of the compiled
    # model; a copy steps as the freshly compiled model does, bit for bit
    # (tests/unit/test_envs.py).
    import mujoco

    model = copy.copy(_compiled_model(self.fullpath))
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
    return model, mujoco.MjData(model)


@functools.lru_cache(maxsize=None)
def model_sharing(cls: type) -> type:
    """Meta-World's environment class ``cls``, building its MuJoCo model from a per-process
    compiled copy (:func:`_compiled_model`) instead of compiling the XML again."""
    return type(cls.__name__, (cls,), {"_initialize_simulation": _initialize_from_compiled})


def metaworld_class(name: str, fast: bool = True) -> type:
    """Meta-World's environment class of task ``name`` as this project builds it: on a shared
    compiled model (:func:`model_sharing`), with the fast step
    (:func:`~ptsl.core.fast_env.fast_class`, the same bits as stock Meta-World's) unless
    ``fast`` is false."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    from .fast_env import fast_class  # imported here: it loads MuJoCo and Meta-World

    cls = ALL_V3_ENVIRONMENTS[name]
    return model_sharing(fast_class(cls) if fast else cls)


def _package_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


class RewardNormalizer:
    """Exponential moving estimate of the reward variance; rewards are divided by its root.

    As mtenv/garage ``NormalizedEnvWrapper``: mean and variance start at 0 and 1, both update with
    ``alpha`` once per step, and the mean is tracked but not subtracted. (Meta-World 3's own
    ``NormalizeRewardsExponential`` updates twice per step, so it is not used.)
    """

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.mean = 0.0
        self.var = 1.0

    def __call__(self, reward: float) -> float:
        self.mean = (1 - self.alpha) * self.mean + self.alpha * reward
        self.var = (1 - self.alpha) * self.var + self.alpha * (reward - self.mean) ** 2
        return reward / (np.sqrt(self.var) + 1e-8)


#: Where Meta-World v1's 12-number observation lies in v3's 39 (``env.observation: v1``): hand
#: xyz (v3's tool-centre point), the first and second object's xyz (v1 pads a missing second
#: object with zeros, as v3 does; v3 adds each object's quaternion and the gripper opening, left
#: out) and the goal xyz; v3's previous frame (18 numbers) is left out too (reference 1.1).
V1_OBSERVATION = np.r_[0:3, 4:7, 11:14, 36:39]


class MetaWorldTaskEnv(gym.Env):
    """One Meta-World task under the project's protocol (a gymnasium env, picklable factory)."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(self, name: str, goals: tuple, env_cfg: EnvConfig, seed: int,
                 normalize: bool, render_size: int | None = None, fast: bool = True) -> None:
        # render_size: off-screen RGB frames of that many pixels square (rollout videos).
        # fast: the fast step (the same bits; the benchmark and tests step stock beside it).
        render = ({} if render_size is None else
                  {"render_mode": "rgb_array", "camera_name": "corner2",
                   "width": render_size, "height": render_size})
        self._env = metaworld_class(name, fast)(
            reward_function_version=env_cfg.reward_version, **render)
        self._env.seed(seed)
        self._render_ready = False
        # Episodes are cut here; Meta-World refuses to step past its own max_path_length.
        self._env.max_path_length = env_cfg.episode_length
        self._goals = goals
        self._resample = env_cfg.goals == "resample"
        self._rng = np.random.default_rng(seed)
        self._episode_length = env_cfg.episode_length
        self._normalizer = RewardNormalizer(env_cfg.reward_alpha) if normalize else None
        self._t = 0
        self.goal_index = int(self._rng.integers(len(goals)))
        self._env.set_task(goals[self.goal_index])
        self._layout = V1_OBSERVATION if env_cfg.observation == "v1" else None
        shape = (len(V1_OBSERVATION),) if self._layout is not None else \
            self._env.observation_space.shape
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape, np.float32)
        self.action_space = self._env.action_space

    # State that a resume must restore (read and written through the vector env's attributes).
    @property
    def protocol_state(self) -> dict[str, Any]:
        norm = self._normalizer
        return {"rng": self._rng.bit_generator.state, "goal_index": self.goal_index,
                "reward_mean": norm.mean if norm else 0.0, "reward_var": norm.var if norm else 1.0}

    @protocol_state.setter
    def protocol_state(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state["rng"]
        self.goal_index = state["goal_index"]
        self._env.set_task(self._goals[self.goal_index])
        if self._normalizer is not None:
            self._normalizer.mean = state["reward_mean"]
            self._normalizer.var = state["reward_var"]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new episode. With resampled goals it draws its goal, unless ``options`` names one
        (``{"goal": k}``: the k-th of the task's goals, as an evaluation that visits each goal
        in turn asks) or keeps the current one (``{"keep_goal": True}``: the first reset of a
        resumed run, whose checkpoint was made after the goal was drawn)."""
        options = options or {}
        if "goal" in options:
            self.goal_index = int(options["goal"]) % len(self._goals)
            self._env.set_task(self._goals[self.goal_index])
        elif self._resample and not options.get("keep_goal"):
            self.goal_index = int(self._rng.integers(len(self._goals)))
            self._env.set_task(self._goals[self.goal_index])
        self._t = 0
        obs, info = self._env.reset()
        return self._observe(obs), info

    def _observe(self, obs: np.ndarray) -> np.ndarray:
        return (obs if self._layout is None else obs[self._layout]).astype(np.float32)

    def step(self, action):
        obs, reward, terminated, _truncated, info = self._env.step(action)
        self._t += 1
        info = {"success": float(info["success"]), "raw_reward": float(reward)}
        if self._normalizer is not None:
            reward = self._normalizer(float(reward))
        truncated = self._t >= self._episode_length
        return self._observe(obs), float(reward), bool(terminated), truncated, info

    def render(self) -> np.ndarray:
        """The current frame (H, W, 3) uint8; needs ``render_size`` and an off-screen GL."""
        frame = self._env.render()
        if not self._render_ready:
            # Shadows and reflections make software GL (OSMesa) about 4x slower and add little
            # at thumbnail size; the viewer exists only after the first render.
            import mujoco

            scene = self._env.mujoco_renderer._get_viewer("rgb_array").scn
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                scene.flags[flag] = 0
            self._render_ready = True
            frame = self._env.render()
        # Meta-World's cameras deliver the image bottom row first.
        return np.ascontiguousarray(frame[::-1])

    def close(self) -> None:
        self._env.close()


def task_seed(seed: int, index: int) -> int:
    """The seed of task ``index``'s environment in a run with ``seed``."""
    return seed * 1000 + index


@dataclass
class StepResult:
    """One vector step: arrays with one row per task."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: bool
    success: np.ndarray
    raw_reward: np.ndarray


class SerialEnvs:
    """Sub-environments stepped one after another in this process, with the slice of
    gymnasium's vector-env interface that :class:`MultiTaskVecEnv` uses.

    gymnasium's ``SyncVectorEnv`` does the same steps but merges every step's info dictionaries
    key by key and deep-copies the observations, which cost about a tenth of the step rate here.
    Autoreset is never wanted (all tasks reset together), so there is none.
    """

    def __init__(self, fns: list[Any]) -> None:
        self.envs = [fn() for fn in fns]
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space

    def reset(self, options: dict | None = None) -> tuple[np.ndarray, dict]:
        return np.stack([env.reset(options=options)[0] for env in self.envs]), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        n = len(self.envs)
        obs = np.empty((n, *self.single_observation_space.shape), np.float32)
        reward, success, raw = np.empty(n), np.empty(n), np.empty(n)
        terminated, truncated = np.empty(n, bool), np.empty(n, bool)
        for i, env in enumerate(self.envs):
            obs[i], reward[i], terminated[i], truncated[i], info = env.step(actions[i])
            success[i], raw[i] = info["success"], info["raw_reward"]
        return obs, reward, terminated, truncated, {"success": success, "raw_reward": raw}

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(getattr(env, name) for env in self.envs)

    def set_attr(self, name: str, values: list[Any]) -> None:
        for env, value in zip(self.envs, values, strict=True):
            setattr(env, name, value)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def eval_env(tasks: TaskSet, env_cfg: EnvConfig, seed: int) -> "MultiTaskVecEnv":
    """The environment evaluation steps: the run's goals, raw rewards (reported as they are),
    tasks stepped in this process. A separate one from training's (upstream mtrl; PTSL's HEAD
    reuses the training env, reference Q1)."""
    return MultiTaskVecEnv(tasks, env_cfg, seed, normalize_reward=False, vector="sync")


def check_benchmark(benchmark: str, env_cfg: EnvConfig, seed: int, task_cache: Path | None,
                    steps: int = 3) -> dict[str, Any]:
    """Build every task of ``benchmark``, reset it and take ``steps`` random steps; returns its
    sizes and task names (the check_env stage's record). A failure is an
    :class:`EnvCheckError` saying what to check."""
    try:
        tasks = load_tasks(benchmark, seed, task_cache)
        env = eval_env(tasks, env_cfg, seed)
    except Exception as exc:  # noqa: BLE001 - any failure to build means the same fix
        raise EnvCheckError(f"Meta-World benchmark {benchmark} did not build ({type(exc).__name__}:"
                            f" {exc}); check the metaworld and mujoco versions (`make install`)"
                            ) from exc
    try:
        obs = env.reset()
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            res = env.step(env.sample_actions(rng))
            if not np.all(np.isfinite(res.obs)):
                raise EnvCheckError(f"{benchmark}: non-finite observation after a random step")
    finally:
        env.close()
    return {"num_tasks": tasks.num_tasks, "obs_dim": int(obs.shape[1]),
            "action_dim": env.action_dim, "tasks": list(tasks.names)}


class MultiTaskVecEnv:
    """All tasks of a benchmark stepped together; row ``i`` is task ``i`` (``task_ids``).

    Sub-environments run in lock-step, so every episode ends for all tasks at the same step and
    the caller resets them together (gymnasium's autoreset is disabled).
    """

    def __init__(self, tasks: TaskSet, env_cfg: EnvConfig, seed: int, *,
                 normalize_reward: bool | None = None, vector: str = "sync",
                 fast: bool = True) -> None:
        normalize = env_cfg.normalize_reward if normalize_reward is None else normalize_reward
        fns = [functools.partial(MetaWorldTaskEnv, name, tasks.goals[i], env_cfg,
                                 task_seed(seed, i), normalize, fast=fast)
               for i, name in enumerate(tasks.names)]
        kwargs = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}
        if vector == "async":
            self._vec = gym.vector.AsyncVectorEnv(fns, context="spawn", **kwargs)
        else:
            self._vec = SerialEnvs(fns)
        self.tasks = tasks
        self.num_tasks = tasks.num_tasks
        self.task_ids = np.arange(self.num_tasks, dtype=np.int64)
        self.obs_dim = int(self._vec.single_observation_space.shape[0])
        self.action_dim = int(self._vec.single_action_space.shape[0])
        self.action_low = self._vec.single_action_space.low
        self.action_high = self._vec.single_action_space.high
        self.episode_length = env_cfg.episode_length
        #: Whether every reset draws a new goal (``env.goals: resample``).
        self.resamples_goals = env_cfg.goals == "resample"
        self._pending: Future | bool | None = None
        self._thread: ThreadPoolExecutor | None = None

    def reset(self, goal: int | None = None, keep_goals: bool = False) -> np.ndarray:
        """Start an episode of every task: on each task's ``goal``-th goal when one is given,
        on the current goals with ``keep_goals``, else as the protocol says (resampled goals
        draw a new one)."""
        options = {"goal": goal} if goal is not None else ({"keep_goal": True} if keep_goals
                                                           else None)
        obs, _ = self._vec.reset(options=options)
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        """Step every task with one action each (row ``i`` for task ``i``).

        ``sync`` sub-environments step in the calling thread: with nothing to overlap, handing
        the step to the worker thread and back only costs (about a tenth of the step rate).
        """
        if isinstance(self._vec, SerialEnvs):
            if self._pending is not None:
                raise RuntimeError("step called while a step_async is pending")
            return self._result(*self._vec.step(np.array(actions)))
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: np.ndarray) -> None:
        """Start a step and return at once; :meth:`step_wait` collects it.

        ``async`` sub-environments step in their worker processes; ``sync`` ones in one worker
        thread (MuJoCo and torch release the GIL while they compute), so the caller can run the
        SAC update meanwhile. Nothing else touches these environments until :meth:`step_wait`,
        so the result is the same as a plain :meth:`step`.
        """
        if self._pending is not None:
            raise RuntimeError("step_async called twice without step_wait")
        if isinstance(self._vec, gym.vector.AsyncVectorEnv):
            self._vec.step_async(actions)
            self._pending = True
        else:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vecenv")
            self._pending = self._thread.submit(self._vec.step, np.array(actions))

    def step_wait(self) -> StepResult:
        """Finish the step started by :meth:`step_async`."""
        pending, self._pending = self._pending, None
        if pending is None:
            raise RuntimeError("step_wait called without step_async")
        return self._result(*(self._vec.step_wait() if pending is True else pending.result()))

    @staticmethod
    def _result(obs: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
                truncated: np.ndarray, info: dict) -> StepResult:
        return StepResult(obs=obs, reward=reward.astype(np.float32), terminated=terminated,
                          truncated=bool(truncated.all()),
                          success=np.asarray(info["success"], dtype=np.float32),
                          raw_reward=np.asarray(info["raw_reward"], dtype=np.float32))

    def sample_actions(self, rng: np.random.Generator) -> np.ndarray:
        """Uniform random actions for every task, drawn from ``rng``."""
        return rng.uniform(self.action_low, self.action_high,
                           size=(self.num_tasks, self.action_dim)).astype(np.float32)

    def get_state(self) -> list[dict[str, Any]]:
        """Per-task protocol state (goal rng, normaliser statistics) for resume."""
        return list(self._vec.get_attr("protocol_state"))

    def set_state(self, states: list[dict[str, Any]]) -> None:
        self._vec.set_attr("protocol_state", states)

    def close(self) -> None:
        if self._pending is not None:  # let a started step finish before closing its envs
            try:
                self.step_wait()
            except Exception:  # noqa: BLE001 - closing after a failure; the failure is raised elsewhere
                pass
        if self._thread is not None:
            self._thread.shutdown(wait=True)
        self._vec.close()
