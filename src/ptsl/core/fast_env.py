"""Meta-World's step with its Python overhead cut, to the same bits.

A stock Meta-World step spends more time in Python than in MuJoCo: ``touching_object`` walks
``data.contact`` one Python object at a time (hundreds of microseconds for push and
pick-place), ``Rotation.from_matrix(...).as_quat()`` pays scipy's set-up for one 3x3 matrix,
every ``data.body(name)`` builds a view by name, and ``np.clip``/``np.hstack``/``np.split``
wrap a few dozen numbers in layers of Python. :func:`fast_class` gives a task's class a
subclass that does the same arithmetic on the same numbers in the same order without those
costs:

- contacts read as arrays (:meth:`FastSawyer.touching_object`);
- the object quaternion by :mod:`ptsl.core.rotation` (scipy's algorithm, no scipy per call);
- views of bodies and sites looked up by name once per environment;
- the observation assembled in place and clipped by the ufunc ``np.clip`` calls;
- in the task's own reward code, ``reward_utils.tolerance`` of one number
  (:mod:`ptsl.core.fast_rewards`) and ``np.linalg.norm`` of a vector
  (:mod:`ptsl.core.fast_numpy`) without the argument handling around their arithmetic.

Each override replaces only a method the task inherits unchanged from ``SawyerXYZEnv`` (a
task that overrides one keeps its own), and only under the Meta-World version the overrides
were checked against (:data:`CHECKED_METAWORLD`); under any other the stock class is used and
one warning line says so. ``tests/unit/test_fast_env.py`` steps every one of the 50 tasks both
ways and requires every observation, reward, flag and info entry to be equal bit for bit.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from importlib.metadata import version
from typing import Any

import mujoco
import numpy as np
# The ufunc that np.clip dispatches to (numpy/_core/_methods.py): the same kernel, without the
# microseconds of Python between.
from numpy._core.umath import clip as _clip

from .rotation import ExactRotation

#: The Meta-World release whose SawyerXYZEnv these overrides reproduce.
CHECKED_METAWORLD = "3.1.1"

_MOCAP_QUAT = np.array([1.0, 0.0, 1.0, 0.0])  # Meta-World's fixed gripper orientation


def _clip_unit(x: float) -> float:
    """``np.clip(x, 0.0, 1.0)`` of one double: numpy's clip is max then min, each keeping a NaN
    and choosing the bound unless ``x`` is strictly inside it (numpy/_core/src/umath/clip.cpp)."""
    if x != x:
        return x
    x = x if x > 0.0 else 0.0
    return x if x < 1.0 else 1.0


class FastSawyer:
    """Faster copies of ``SawyerXYZEnv``'s per-step methods (Meta-World 3.1.1), each computing
    what the stock method computes, in the same order and with the same numpy kernels."""

    # -- lookups by name, once per environment (MuJoCo's data is never replaced after
    #    construction: reset, set_task and step write into the same MjData) --

    def _fast_view(self, kind: str, name: str) -> Any:
        try:
            return self._fast_views[kind, name]
        except AttributeError:
            self._fast_views: dict[tuple[str, str], Any] = {}
        except KeyError:
            pass
        view = self._fast_views[kind, name] = getattr(self.data, kind)(name)
        return view

    def get_body_com(self, body_name: str) -> np.ndarray:
        return self._fast_view("body", body_name).xpos

    def get_endeff_pos(self) -> np.ndarray:
        return self._fast_view("body", "hand").xpos

    @property
    def tcp_center(self) -> np.ndarray:
        right = self._fast_view("site", "rightEndEffector").xpos
        left = self._fast_view("site", "leftEndEffector").xpos
        return (right + left) / 2.0

    def _get_site_pos(self, site_name: str) -> np.ndarray:
        return self._fast_view("site", site_name).xpos.copy()

    def _set_pos_site(self, name: str, pos: np.ndarray) -> None:
        assert isinstance(pos, np.ndarray)
        assert pos.ndim == 1
        self._fast_view("site", name).xpos = pos[:3]

    def _get_id_main_object(self) -> int:
        return self._fast_view("geom", "objGeom").id

    # -- contacts --

    def touching_object(self, object_geom_id: int) -> bool:
        """Whether both pads push on the object: the sums of the pad-object contact forces,
        added in contact order from the integer 0 as Python's ``sum`` adds them, both positive.
        The contacts are read as two arrays, not as one Python object each."""
        left = self._fast_view("geom", "leftpad_geom").id
        right = self._fast_view("geom", "rightpad_geom").id
        left_force = right_force = 0
        data = self.data
        if data.ncon:
            contact = data.contact
            force = data.efc_force
            for (g1, g2), address in zip(contact.geom.tolist(), contact.efc_address.tolist()):
                if object_geom_id in (g1, g2):
                    if left in (g1, g2):
                        left_force = left_force + force[address]
                    if right in (g1, g2):
                        right_force = right_force + force[address]
        return 0 < left_force and 0 < right_force

    # -- the step --

    def set_xyz_action(self, action: np.ndarray) -> None:
        pos_delta = _clip(action, -1, 1) * self.action_scale
        mocap_pos = self.data.mocap_pos
        new_mocap_pos = mocap_pos + pos_delta  # broadcast over the rows, as pos_delta[None]
        _clip(new_mocap_pos[0], self.mocap_low, self.mocap_high, out=new_mocap_pos[0])
        mocap_pos[:] = new_mocap_pos
        self.data.mocap_quat[:] = _MOCAP_QUAT

    def _reset_hand(self, steps: int = 50) -> None:
        mocap_id = self.model.body_mocapid[self._fast_view("body", "mocap").id]
        data = self.data
        for _ in range(steps):
            data.mocap_pos[mocap_id][:] = self.hand_init_pos
            data.mocap_quat[mocap_id][:] = _MOCAP_QUAT
            self._step_mujoco_simulation([-1, 1], self.frame_skip)
        self.init_tcp = self.tcp_center

    def _get_curr_obs_combined_no_goal(self) -> np.ndarray:
        out = np.zeros(4 + self._obs_obj_max_len)  # hand, gripper, objects padded with zeros
        out[0:3] = self.get_endeff_pos()
        gap = (self._fast_view("body", "rightclaw").xpos
               - self._fast_view("body", "leftclaw").xpos)
        # np.linalg.norm of a 1-D float vector is sqrt(x.dot(x)) (numpy/linalg/_linalg.py)
        out[3] = _clip_unit(float(np.sqrt(gap.dot(gap))) / 0.1)
        obj_pos = self._get_pos_objects()
        assert len(obj_pos) % 3 == 0
        obj_quat = self._get_quat_objects()
        assert len(obj_quat) % 4 == 0
        assert len(obj_pos) // 3 == len(obj_quat) // 4  # stock fails on a mismatch too
        k = 4
        for n in range(len(obj_pos) // 3):
            out[k:k + 3] = obj_pos[3 * n:3 * n + 3]
            out[k + 3:k + 7] = obj_quat[4 * n:4 * n + 4]
            k += 7
        return out

    def _get_obs(self) -> np.ndarray:
        pos_goal = self._get_pos_goal()
        if self._partially_observable:
            pos_goal = np.zeros_like(pos_goal)
        curr_obs = self._get_curr_obs_combined_no_goal()
        # np.hstack of 1-D arrays is np.concatenate
        obs = np.concatenate((curr_obs, self._prev_obs, pos_goal))
        self._prev_obs = curr_obs
        return obs

    def step(self, action: np.ndarray) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        if not self._set_task_called:
            raise RuntimeError("You must call env.set_task before using env.step")
        assert len(action) == 4, f"Actions should be size 4, got {len(action)}"
        self.set_xyz_action(action[:3])
        if self.curr_path_length >= self.max_path_length:
            raise ValueError("You must reset the env manually once truncate==True")
        # do_simulation's only addition is a check of the control's shape: two numbers, as
        # every Sawyer model has two actuators
        self._step_mujoco_simulation([action[-1], -action[-1]], self.frame_skip)
        self.curr_path_length += 1
        for site in self._target_site_config:
            self._set_pos_site(*site)
        if self._did_see_sim_exception:  # never set in Meta-World 3.1.1; kept as stock has it
            return self._step_after_sim_exception()
        mujoco.mj_forward(self.model, self.data)
        space = self.sawyer_observation_space
        self._last_stable_obs = _clip(self._get_obs(), space.low, space.high,
                                      dtype=np.float64)
        reward, info = self.evaluate_state(self._last_stable_obs, action)
        truncate = self.curr_path_length == self.max_path_length
        return self._last_stable_obs.copy(), reward, False, truncate, info

    def _step_after_sim_exception(self) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        return (self._last_stable_obs, 0.0, False, False,
                {"success": False, "near_object": 0.0, "grasp_success": False,
                 "grasp_reward": 0.0, "in_place_reward": 0.0, "obj_to_target": 0.0,
                 "unscaled_reward": 0.0})


def _rebound_names() -> dict[str, tuple[Any, Any]]:
    """Global names of Meta-World's task code that a fast class resolves to faster
    equivalents of the same bits: name -> (Meta-World's object, the replacement)."""
    from metaworld.utils import reward_utils
    from scipy.spatial.transform import Rotation

    from .fast_numpy import NUMPY
    from .fast_rewards import REWARD_UTILS

    return {"Rotation": (Rotation, ExactRotation), "reward_utils": (reward_utils, REWARD_UTILS),
            "np": (np, NUMPY)}


def _uses(code: types.CodeType, names: set[str]) -> bool:
    """Whether ``code`` or code nested in it (a comprehension, a lambda) reads one of ``names``."""
    return bool(names & set(code.co_names)) or any(
        _uses(const, names) for const in code.co_consts if isinstance(const, types.CodeType))


def _contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet filled: nothing to copy
        return None


def _rebind(func: types.FunctionType, names: dict[str, tuple[Any, Any]]
            ) -> types.FunctionType | None:
    """A copy of ``func`` whose globals in ``names`` resolve to their replacements, and whose
    closure holds such copies of the functions it held (a decorator's wrapper holds the
    method); None when neither ``func`` nor its closure reads one of them. The task's own
    code runs; Meta-World's modules and classes are left as they are."""
    ours = {name: new for name, (old, new) in names.items()
            if func.__globals__.get(name) is old}
    closure = func.__closure__
    inner = [_contents(cell) for cell in closure or ()]
    copies = [_rebind(f, names) if isinstance(f, types.FunctionType) else None for f in inner]
    if not (ours and _uses(func.__code__, set(ours))) and not any(copies):
        return None
    if any(copies):
        closure = tuple(cell if c is None else types.CellType(c)
                        for cell, c in zip(closure, copies))
    out = types.FunctionType(func.__code__, {**func.__globals__, **ours}, func.__name__,
                             func.__defaults__, closure)
    out.__kwdefaults__ = func.__kwdefaults__
    out.__qualname__ = func.__qualname__
    out.__doc__ = func.__doc__
    return out


@functools.lru_cache(maxsize=None)
def fast_enabled() -> bool:
    """Whether the installed Meta-World is the checked one; if not, one warning line (once)."""
    installed = version("metaworld")
    if installed != CHECKED_METAWORLD:
        print(f"warning: metaworld {installed} is installed; the fast step was checked against "
              f"{CHECKED_METAWORLD} only, so environments step as stock Meta-World does",
              file=sys.stderr)
        return False
    return True


@functools.lru_cache(maxsize=None)
def fast_class(cls: type) -> type:
    """Meta-World task class ``cls`` with :class:`FastSawyer`'s methods where ``cls`` inherits
    ``SawyerXYZEnv``'s unchanged, and its own methods that call scipy's ``Rotation``,
    ``reward_utils`` or numpy copied to call the exact faster ones (:func:`_rebind`); ``cls`` itself
    under an unchecked Meta-World version."""
    if not fast_enabled():
        return cls
    from metaworld.sawyer_xyz_env import SawyerXYZEnv

    namespace: dict[str, Any] = {
        name: value for name, value in vars(FastSawyer).items()
        if not name.startswith("__")
        and getattr(cls, name, None) is getattr(SawyerXYZEnv, name, None)
    }
    names = _rebound_names()
    for klass in cls.__mro__:  # Meta-World's own code: the task's class and its bases
        if not klass.__module__.startswith("metaworld."):
            continue
        for name, value in vars(klass).items():
            if name in namespace or inspect.getattr_static(cls, name) is not value:
                continue  # FastSawyer's, or overridden further down the MRO
            # methods, and static methods (door's and the peg tasks' reward terms)
            method = value.__func__ if isinstance(value, staticmethod) else value
            if not isinstance(method, types.FunctionType):
                continue
            copy = _rebind(method, names)
            if copy is not None:
                namespace[name] = staticmethod(copy) if method is not value else copy
    return type(cls.__name__, (cls,), namespace)
