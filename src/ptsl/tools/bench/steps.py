"""Per task, one environment step three ways on the same states: stock Meta-World's step, the
fast step (:mod:`ptsl.core.fast_env`) and MuJoCo's own work in it, ``mj_step`` over the frame
skip plus ``mj_forward`` (what no Python around MuJoCo can go below).

Each round resets every contender to the task's goal, then steps it through the same random
actions; only the steps are timed, resets not. The stock and fast environments are equal bit
for bit (``tests/unit/test_fast_env.py``), so they pass through the same states; the MuJoCo
contender replays the mocap positions and controls the environment's ``set_xyz_action`` gives
for those actions on a copy of the environment's ``MjData``, and its final ``qpos`` is checked
equal to the fast environment's, so it passed through them too."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np

from ...core.config import EnvConfig
from ...core.envs import TaskSet, metaworld_class
from .record import SectionFailed

#: Tasks whose stock step pays most for Python (``touching_object``), with their own target.
CONTACT_TASKS = ("push-v3", "pick-place-v3")


class _TaskContenders:
    """Stock, fast and MuJoCo-only stepping of one task on its first goal."""

    def __init__(self, name: str, goal: Any, env_cfg: EnvConfig) -> None:
        self.envs = {}
        for kind, fast in (("stock", False), ("fast", True), ("mujoco", True)):
            env = metaworld_class(name, fast=fast)(
                reward_function_version=env_cfg.reward_version)
            env.max_path_length = 10**9  # episodes are cut here, by the round
            env.set_task(goal)
            self.envs[kind] = env
        self.replay = self.envs["mujoco"].data

    def round(self, actions: np.ndarray, order: list[str]) -> dict[str, float]:
        """Seconds each contender takes for ``actions``, from the same reset, in ``order``."""
        for env in self.envs.values():
            env.reset()
        plan = self._plan(actions)
        seconds = {}
        for kind in order:
            seconds[kind] = self._replay(plan) if kind == "mujoco" else \
                self._step(self.envs[kind], actions)
        if self.replay.qpos.tobytes() != self.envs["fast"].data.qpos.tobytes():
            raise SectionFailed(f"{type(self.envs['fast']).__name__}: MuJoCo's replay left the "
                                "environment's states", {})
        return seconds

    @staticmethod
    def _step(env: Any, actions: np.ndarray) -> float:
        t0 = time.perf_counter()
        for action in actions:
            env.step(action)
        return time.perf_counter() - t0

    def _plan(self, actions: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """The mocap position and controls of every step (the environment's own
        ``set_xyz_action``, which reads nothing but the mocap position), and the MuJoCo
        contender's data at the reset state."""
        env = self.envs["mujoco"]
        self.replay = copy.copy(env.data)
        plan = []
        for action in actions:
            env.set_xyz_action(action[:3])
            plan.append((env.data.mocap_pos.copy(), np.array([action[-1], -action[-1]])))
        return plan

    def _replay(self, plan: list[tuple[np.ndarray, np.ndarray]]) -> float:
        env, data = self.envs["mujoco"], self.replay
        model, skip = env.model, env.frame_skip
        quat = env.data.mocap_quat.copy()
        t0 = time.perf_counter()
        for mocap_pos, ctrl in plan:
            data.mocap_pos[:] = mocap_pos
            data.mocap_quat[:] = quat
            data.ctrl[:] = ctrl
            mujoco.mj_step(model, data, nstep=skip)
            mujoco.mj_forward(model, data)
        return time.perf_counter() - t0

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def measure_steps(tasks: TaskSet, env_cfg: EnvConfig, mt10: tuple[str, ...], *, rounds: int,
                  steps: int, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Microseconds per step of each contender per task (medians over ``rounds`` interleaved
    rounds of ``steps`` random steps) and their ratios (medians of same-round ratios); the
    MT10 tasks' mean step the same way."""
    rng = np.random.default_rng(0)
    names = ("stock", "fast", "mujoco")
    samples: dict[str, list[dict[str, float]]] = {}
    for name, goals in zip(tasks.names, tasks.goals):
        task = _TaskContenders(name, goals[0], env_cfg)
        try:
            task.round(rng.uniform(-1, 1, (steps, 4)).astype(np.float32), list(names))  # warm-up
            samples[name] = [task.round(rng.uniform(-1, 1, (steps, 4)).astype(np.float32),
                                        list(names[r % 3:] + names[:r % 3]))
                             for r in range(rounds)]
        finally:
            task.close()
        if progress:
            progress(f"steps {name}")
    per_task = {name: _figures(rows, steps) for name, rows in samples.items()}
    mean = [{k: sum(samples[t][r][k] for t in mt10) / len(mt10) for k in names}
            for r in range(rounds)]
    return {"steps": steps, "rounds": rounds, "reward_version": env_cfg.reward_version,
            "tasks": per_task, "mt10_mean": _figures(mean, steps)}


def _figures(rows: list[dict[str, float]], steps: int) -> dict[str, float]:
    def median(f: Callable[[dict[str, float]], float]) -> float:
        return statistics.median(f(row) for row in rows)

    return {"stock_us": median(lambda r: r["stock"]) / steps * 1e6,
            "fast_us": median(lambda r: r["fast"]) / steps * 1e6,
            "mujoco_us": median(lambda r: r["mujoco"]) / steps * 1e6,
            "stock_over_fast": median(lambda r: r["stock"] / r["fast"]),
            "fast_over_mujoco": median(lambda r: r["fast"] / r["mujoco"]),
            "stock_over_mujoco": median(lambda r: r["stock"] / r["mujoco"])}
