"""EnvPool's native Meta-World against Farama's, task by task, from aligned states.

``python -m ptsl.tools.envpool_parity [--seeds N] [--steps T] [--tasks a,b] [--out FOLDER]``
builds, for every Meta-World v3 task and seed ``1..N``, EnvPool's environment (``envpool``,
its native C++ port: ``MetaWorld/<Task>-v3``, the goal visible as in Meta-World's multi-task
benchmarks) and Farama's (``metaworld``, the v2 reward: EnvPool has no other), on the same object
and goal placement, each set through its own API: EnvPool draws its placement from its seed (a
``std::mt19937`` seeded with the seed, ``std::uniform_real_distribution`` per dimension of the
task's random reset space, a new draw while the task rejects the placement); this tool draws
the same numbers in Python and gives them to Farama's ``set_task`` (of the first few
placements, the one whose reset comes nearest EnvPool's: the two tasks' rules for rejecting a
placement need not agree). The reset observations of the two then say how well the states
agree.

From there, per task and seed: Meta-World's scripted policy (actions chosen on Farama's
observation, the same actions to both) and a uniform random policy for ``T`` steps, recording
the largest absolute difference of each observation component and of the v2 reward, and the
steps whose success flags differ; and the scripted policy run on each environment alone (each
on its own observations), its success at any step in each. Results print and go to
``envpool_parity.csv`` (a row per task, seed and policy) and ``envpool_parity.md`` (a row per
task) in ``--out`` (default ``reports/envpool_parity``).
"""

from __future__ import annotations

import pickle
import sys
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..cli import ArgumentParser, run, whole
from ..core.envs import metaworld_class
from ..core.files import write_atomic

DEFAULT_OUT = Path("reports/envpool_parity")
#: Observation components by meaning (Meta-World v3's 39 numbers: this frame's 18, the previous
#: frame's 18, the goal).
PARTS = {"hand": np.r_[0:3, 18:21], "gripper": np.r_[3, 21],
         "object position": np.r_[4:7, 11:14, 22:25, 29:32],
         "object quaternion": np.r_[7:11, 14:18, 25:29, 32:36], "goal": np.r_[36:39]}


def envpool_id(name: str) -> str:
    """EnvPool's id of Meta-World task ``name`` (``push-v3`` -> ``MetaWorld/Push-v3``)."""
    from envpool.mujoco.metaworld.registration import metaworld_task_id

    return metaworld_task_id(name)


def _mt19937_stream(seed: int) -> Iterator[int]:
    """The 32-bit outputs of C++'s ``std::mt19937(seed)`` (numpy's MT19937 seeded the legacy
    way is the same generator: Matsumoto and Nishimura's init_genrand)."""
    bits = np.random.MT19937()
    bits._legacy_seeding(seed)
    while True:
        yield from bits.random_raw(64).tolist()


def _uniform(stream: Iterator[int], low: float, high: float) -> float:
    """libstdc++'s ``std::uniform_real_distribution<double>(low, high)`` on a 32-bit generator:
    ``generate_canonical`` from two outputs, scaled."""
    u = (float(next(stream)) + float(next(stream)) * 4294967296.0) / 18446744073709551616.0
    if u >= 1.0:
        u = float(np.nextafter(1.0, 0.0))
    return u * (high - low) + low


#: Placements of EnvPool's generator drawn for one reset at most, and accepted ones tried.
DRAWS, TRIED = 64, 3


class _Rejected(Exception):
    """Farama's reset asked for another placement: the drawn one is one the task rejects."""


def _farama(name: str, rand_vec: np.ndarray) -> Any:
    """Farama's environment of task ``name`` (v2 reward, the goal observed) on placement
    ``rand_vec``, reset; raises :class:`_Rejected` if the task rejects that placement (with a
    frozen placement Meta-World would ask again for ever)."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    from metaworld.types import Task

    cls = metaworld_class(name)
    calls = {"n": 0}

    class Guarded(cls):  # type: ignore[valid-type,misc]
        def _get_state_rand_vec(self) -> np.ndarray:
            calls["n"] += 1
            if calls["n"] > 8:  # two reset_model calls a reset, and any retry
                raise _Rejected
            return super()._get_state_rand_vec()

    env = Guarded(reward_function_version="v2")
    env.set_task(Task(env_name=name, data=pickle.dumps(
        {"env_cls": ALL_V3_ENVIRONMENTS[name], "rand_vec": rand_vec,
         "partially_observable": False})))
    return env


def aligned_pair(name: str, seed: int, steps: int) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """EnvPool's and Farama's environments of task ``name`` on EnvPool's placement for
    ``seed``, both reset: (envpool env, farama env, envpool obs, farama obs).

    EnvPool draws again while the task rejects a placement, by its own rule; Farama gets the
    placements its generator gives, in turn, that Farama's own rule accepts, until one resets
    within 1e-6 of EnvPool's reset or :data:`TRIED` have been accepted, and the nearest is kept
    (the same placement where the two rules agree; the residual is reported)."""
    import envpool

    pool = envpool.make_gymnasium(envpool_id(name), num_envs=1, seed=seed,
                                  partially_observable=False, max_episode_steps=steps)
    pool_obs = pool.reset()[0][0]
    space = metaworld_class(name)()._random_reset_space
    stream = _mt19937_stream(seed)
    best: tuple[float, Any, np.ndarray] | None = None
    accepted = 0
    for _ in range(DRAWS):
        if accepted == TRIED or (best is not None and best[0] <= 1e-6):
            break
        rand_vec = np.array([_uniform(stream, lo, hi)
                             for lo, hi in zip(space.low.tolist(), space.high.tolist())])
        try:
            env = _farama(name, rand_vec)
            env.max_path_length = steps
            obs = env.reset()[0]
        except _Rejected:
            continue
        accepted += 1
        gap = float(np.abs(pool_obs - obs).max())
        if best is None or gap < best[0]:
            if best is not None:
                best[1].close()
            best = (gap, env, obs)
        else:
            env.close()
    if best is None:
        raise RuntimeError(f"{name}: none of the first {DRAWS} placements of seed {seed} is "
                           "accepted by Farama's environment")
    return pool, best[1], pool_obs, best[2]


@dataclass
class Run:
    """One episode of one policy on the aligned pair (or, ``alone``, on each separately)."""

    task: str
    seed: int
    policy: str
    steps: int
    reset_diff: float            # largest |observation difference| after reset
    obs_diff: float              # largest over the episode, every component
    obs_part: str                # the component group it occurs in
    reward_diff: float           # largest |v2 reward difference|
    diverged_at: int | None      # first step whose observations differ by more than 1e-6
    success_disagree: int        # steps whose success flags differ
    success_farama: bool         # success at any step
    success_envpool: bool


def _part(index: int) -> str:
    return next(name for name, idx in PARTS.items() if index in idx)


def _scripted(name: str) -> Any:
    from metaworld.policies import ENV_POLICY_MAP

    return ENV_POLICY_MAP[name]()


def _act(policy: Any, obs: np.ndarray) -> np.ndarray:
    # astype copies: the policies write into views of the observation they parse
    return np.clip(policy.get_action(obs.astype(np.float64)), -1, 1).astype(np.float32)


def episode(name: str, seed: int, policy: str, steps: int) -> Run:
    """One aligned episode: ``policy`` is ``scripted`` (chosen on Farama's observations),
    ``random`` or ``alone`` (the scripted policy on each environment's own observations)."""
    pool, env, pool_obs, obs = aligned_pair(name, seed, steps)
    reset_diff = float(np.abs(pool_obs - obs).max())
    scripted = {"farama": _scripted(name), "envpool": _scripted(name)}
    rng = np.random.default_rng(seed)
    worst = np.zeros(39)
    reward_diff, diverged, disagree = 0.0, None, 0
    success = {"farama": False, "envpool": False}
    try:
        for t in range(steps):
            if policy == "random":
                a = b = rng.uniform(-1, 1, 4).astype(np.float32)
            else:
                a = _act(scripted["farama"], obs)
                b = _act(scripted["envpool"], pool_obs) if policy == "alone" else a
            obs, reward, _, _, info = env.step(a)
            p_obs, p_reward, _, _, p_info = pool.step(b[None])
            pool_obs = p_obs[0]
            diff = np.abs(pool_obs - obs)
            worst = np.maximum(worst, diff)
            reward_diff = max(reward_diff, abs(float(p_reward[0]) - float(reward)))
            if diverged is None and diff.max() > 1e-6:
                diverged = t + 1
            flags = (bool(info["success"]), bool(p_info["success"][0]))
            disagree += flags[0] != flags[1]
            success["farama"] |= flags[0]
            success["envpool"] |= flags[1]
    finally:
        env.close()
        pool.close()
    return Run(task=name, seed=seed, policy=policy, steps=steps, reset_diff=reset_diff,
               obs_diff=float(worst.max()), obs_part=_part(int(worst.argmax())),
               reward_diff=reward_diff, diverged_at=diverged, success_disagree=disagree,
               success_farama=success["farama"], success_envpool=success["envpool"])


def check(tasks: list[str], seeds: int, steps: int) -> pd.DataFrame:
    """Every task's episodes (scripted, random, alone) for seeds ``1..seeds``."""
    rows = []
    for name in tasks:
        for seed in range(1, seeds + 1):
            for policy in ("scripted", "random", "alone"):
                rows.append(asdict(episode(name, seed, policy, steps)))
        print(f"  {name}", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


#: Agreement, per task: the reset observations within RESET_TOL (the same placement, only
#: rounding between two ports of one model), and under random actions every observation and v2
#: reward within STEP_TOL for the whole episode (EnvPool's own alignment test asks 1e-8 of the
#: observations and 1e-6 of the reward after copying Farama's whole simulator state into its
#: own; 1e-6 m is a micrometre); the scripted policy's success flags never disagreeing and its
#: success the same on each environment alone. Scripted episodes are not held to STEP_TOL:
#: contacts amplify any rounding difference, so diverging there proves no port wrong.
RESET_TOL, STEP_TOL = 1e-9, 1e-6


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per task: the largest differences of each kind, the scripted policy's success
    in each environment, and whether the task agrees (see :data:`STEP_TOL`)."""
    rows = []
    for task, g in runs.groupby("task", sort=False):
        by = {p: g[g.policy == p] for p in ("scripted", "random", "alone")}
        reset = g.loc[g.reset_diff.idxmax()]
        rand = by["random"].loc[by["random"].obs_diff.idxmax()]
        scripted = by["scripted"].loc[by["scripted"].obs_diff.idxmax()]
        alone = by["alone"]
        row = {"task": task, "reset_obs": reset.reset_diff,
               "random_obs": rand.obs_diff, "random_obs_part": rand.obs_part,
               "random_reward": by["random"].reward_diff.max(),
               "scripted_obs": scripted.obs_diff, "scripted_obs_part": scripted.obs_part,
               "scripted_reward": by["scripted"].reward_diff.max(),
               "scripted_diverged_at": by["scripted"].diverged_at.min(),
               "success_disagree_steps": int(by["scripted"].success_disagree.sum()),
               "seeds": len(alone), "success_farama": int(alone.success_farama.sum()),
               "success_envpool": int(alone.success_envpool.sum())}
        row["agrees"] = bool(row["reset_obs"] <= RESET_TOL and row["random_obs"] <= STEP_TOL
                             and row["random_reward"] <= STEP_TOL
                             and row["success_disagree_steps"] == 0
                             and row["success_farama"] == row["success_envpool"])
        rows.append(row)
    return pd.DataFrame(rows)


def _e(x: float) -> str:
    return "—" if pd.isna(x) else f"{x:.1e}"


def markdown(table: pd.DataFrame, seeds: int, steps: int, versions: dict[str, str]) -> str:
    """The record: what was run, the verdict, and a row per task."""
    agree = int(table.agrees.sum())
    lines = [
        "# EnvPool's native Meta-World against Farama's",
        "",
        f"`python -m ptsl.tools.envpool_parity --seeds {seeds} --steps {steps}` "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f". Every task, seeds 1-{seeds}, {steps}-step episodes, the v2 reward, the goal "
        "observed; placements aligned by drawing EnvPool's seeded placement and giving it to "
        "Farama's `set_task` (the goals then agree exactly).",
        "",
        f"**{agree} of {len(table)} tasks agree** within the stated tolerance (reset "
        f"observations within {RESET_TOL:g}; random-action episodes' observations and rewards "
        f"within {STEP_TOL:g}; scripted success flags never disagreeing, the scripted policy's "
        "success the same on each alone).",
        "",
        "Columns: the largest |difference| of any observation component after reset; along "
        "random actions (and the observation part where it occurs) and of the v2 reward; along "
        "the scripted policy's actions (chosen on Farama's observations, the same to both), the "
        "first step whose observations differ by more than 1e-6 and the steps whose success "
        "flags differ; the scripted policy run on each environment alone, successes out of "
        "the seeds (success at any step).",
        "",
        "| task | reset Δobs | random Δobs | random Δreward | scripted Δobs | scripted "
        "Δreward | diverges at step | success flags differ (steps) | scripted success "
        "Farama / EnvPool | agrees |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.task} | {_e(r.reset_obs)} | {_e(r.random_obs)} ({r.random_obs_part}) | "
            f"{_e(r.random_reward)} | {_e(r.scripted_obs)} ({r.scripted_obs_part}) | "
            f"{_e(r.scripted_reward)} | "
            f"{'—' if pd.isna(r.scripted_diverged_at) else int(r.scripted_diverged_at)} | "
            f"{r.success_disagree_steps} | {r.success_farama}/{r.seeds} / "
            f"{r.success_envpool}/{r.seeds} | {'yes' if r.agrees else 'no'} |")
    return "\n".join(lines) + "\n"


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("envpool", "metaworld", "mujoco")}


def main() -> None:
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    ap = ArgumentParser(prog="python -m ptsl.tools.envpool_parity", description=__doc__)
    ap.add_argument("--seeds", type=whole(1), default=3, help="seeds per task (default: 3)")
    ap.add_argument("--steps", type=whole(1), default=150,
                    help="steps per episode (default: 150, the reference protocol's)")
    ap.add_argument("--tasks", default=None,
                    help="comma-separated Meta-World v3 tasks (default: all 50)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the record")
    args = ap.parse_args()
    tasks = list(ALL_V3_ENVIRONMENTS) if args.tasks is None else args.tasks.split(",")
    unknown = [t for t in tasks if t not in ALL_V3_ENVIRONMENTS]
    if unknown:
        ap.error(f"--tasks: {unknown[0]} is not allowed; allowed: Meta-World v3 task names "
                 "such as push-v3")
    try:
        import envpool  # noqa: F401
    except ImportError:
        ap.error("envpool is not installed; `pip install envpool` (1.2.x) to run this check")
    warnings.filterwarnings("ignore", module="metaworld.policies")  # "Constant(s) may be too high"
    runs = check(tasks, args.seeds, args.steps)
    table = summarise(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "envpool_parity.csv", runs.to_csv(index=False).encode(),
                 "EnvPool parity runs")
    text = markdown(table, args.seeds, args.steps, _versions())
    write_atomic(args.out / "envpool_parity.md", text.encode(), "EnvPool parity record")
    print(text)


if __name__ == "__main__":
    run(main)
