"""Reward check: does each MT10 task's reward lead Meta-World's scripted policy toward success?

``python -m ptsl.tools.reward_check [--episodes N] [--seed S] [--out FOLDER]`` runs, for every
MT10 task and for each reward version (v1, the reference protocol's, and v2), Meta-World's
scripted policy for that task (``metaworld.policies``) and a uniform random policy through this
project's environment: the protocol's goal for the seed, 150-step episodes and the environment's
raw reward (no normalisation). Goals are fixed per seed, so episode ``k`` uses run seed ``S + k``
and its goals: N episodes cover N goals per task.

Per task, reward version and policy it reports the success (any step) and the first success
step (mean and latest), the same within 500 steps (Meta-World v3's own episode limit: does 150
cut it short?), the mean reward per step of the policy and of the random one, the return minus
the random one, the share of steps where the reward beats the random policy's at that step, the
reward at the start, at its peak before success, at success (does it rise toward success?) and
at the end, the rank correlation of reward with the step up to success, and the share of steps
the fingers' centre is within 5 cm of the object position (the reach gate of most v1 rewards).

Meta-World's scripted policies were written against the v2 rewards; where one succeeds without
earning the v1 reward, a variant that follows the v1 reward's terms runs beside it (see
``VARIANTS``): on the handle tasks the scripted approach, then the fingers' centre held at the
handle and pushed toward the goal; on peg-insert-side the scripted policy gripping the peg 6 cm
nearer its tail. Both reward versions see the same trajectories (the policies read the state
only); the check records whether they did. Results print as a table and go to
``reward_check.csv`` and ``reward_check.md`` (a table and one verdict line per task) in
``--out`` (default ``reports/reward_check``).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

import numpy as np
import pandas as pd

from ..cli import ArgumentParser, run, whole
from ..core.config import MAX_SEED, EnvConfig
from ..core.envs import MetaWorldTaskEnv, TaskSet, load_tasks, task_seed
from ..core.files import write_atomic
from ..ops.paths import TASK_CACHE

BENCHMARK = "mt10"
VERSIONS = ("v1", "v2")
EPISODE = 150          # the reference protocol's episode length (reference 1.1)
LONG_EPISODE = 500     # Meta-World v3's own limit: a failed episode is retried this long
WINDOW = 10            # steps averaged at the start, before and from the first success, at the end
NEAR = 0.05            # most v1 rewards pay their object term only with the fingers this close
FLAT = 0.1             # a reward at success this share of the episode's range below its earlier
                       # peak still counts as not falling (v2's rewards wobble near their cap)
DEFAULT_OUT = Path("reports/reward_check")

Action = Callable[[np.ndarray], np.ndarray]


@dataclass
class Episode:
    """One episode's per-step record."""

    rewards: np.ndarray    # raw reward
    success: np.ndarray    # Meta-World's success flag
    near: np.ndarray       # fingers' centre within NEAR of the object position (obs[4:7])
    digest: str            # hash of the observations: equal digests, equal trajectories

    @property
    def first_success(self) -> int | None:
        """The first step (1-based) with success, or None."""
        hits = np.flatnonzero(self.success)
        return int(hits[0]) + 1 if hits.size else None


def task_env(name: str, goals: tuple, seed: int, index: int, version: str,
             length: int = EPISODE) -> MetaWorldTaskEnv:
    """Task ``name`` as the run with ``seed`` builds it for evaluation (its goal, raw reward),
    under reward ``version`` and episodes of ``length`` steps."""
    cfg = EnvConfig(reward_version=version, normalize_reward=False, episode_length=length)
    return MetaWorldTaskEnv(name, goals, cfg, task_seed(seed, index), normalize=False)


def _meta_world(env: MetaWorldTaskEnv) -> Any:
    # The fingers' centre and the goal position are Meta-World's (tcp_center, _target_pos);
    # the project's wrapper does not expose them, so they are read from the env it wraps.
    return env._env


def scripted_actor(name: str, env: MetaWorldTaskEnv, grip_shift: float = 0.0) -> Action:
    """Meta-World's scripted policy for task ``name``, its actions clipped to the action space
    (what an agent can emit; the policies' gains ask for more). ``grip_shift`` moves the object
    position the policy reads along x (peg-insert-side's variant grips the peg there)."""
    from metaworld.policies import ENV_POLICY_MAP

    policy = ENV_POLICY_MAP[name]()
    low, high = env.action_space.low, env.action_space.high

    def act(obs: np.ndarray) -> np.ndarray:
        # astype copies: the policies write into the views of the observation they parse.
        seen = obs.astype(np.float64)
        seen[4] += grip_shift
        return np.clip(policy.get_action(seen), low, high)

    return act


@dataclass(frozen=True)
class Held:
    """A variant for a handle task: the scripted approach until the fingers' centre is within
    ``NEAR`` of the object position, then the fingers' centre driven to that position plus
    ``push`` metres along ``axis`` (None: toward the goal, horizontally) and ``dz`` up, the
    gripper at ``grab``. It keeps the v1 reward's reach gate while moving the object."""

    axis: tuple[float, float, float] | None
    dz: float = 0.0
    grab: float = 1.0
    push: float = 0.03


def held_actor(name: str, env: MetaWorldTaskEnv, spec: Held) -> Action:
    """The :class:`Held` variant of task ``name``'s scripted policy (one per episode)."""
    from metaworld.policies.policy import move

    scripted = scripted_actor(name, env)
    inner = _meta_world(env)
    low, high = env.action_space.low, env.action_space.high
    held = [False]

    def act(obs: np.ndarray) -> np.ndarray:
        tcp, obj = inner.tcp_center.copy(), obs[4:7].astype(np.float64)
        held[0] = held[0] or float(np.linalg.norm(tcp - obj)) < NEAR
        if not held[0]:
            return scripted(obs)
        if spec.axis is None:
            way = inner._target_pos - obj
            way[2] = 0.0
        else:
            way = np.array(spec.axis, dtype=np.float64)
        to = obj + spec.push * way / np.linalg.norm(way) + np.array([0.0, 0.0, spec.dz])
        return np.clip(np.r_[move(tcp, to, p=25.0), spec.grab], low, high).astype(np.float32)

    return act


#: Per task: the variant's label and its actor. Drawer-close's handle is held from 1 cm below
#: with the gripper open (its fingers straddle the handle; closed, they ride over it).
VARIANTS: dict[str, tuple[str, Callable[[str, MetaWorldTaskEnv], Action]]] = {
    "door-open-v3": ("held", lambda n, e: held_actor(n, e, Held(axis=None))),
    "drawer-open-v3": ("held", lambda n, e: held_actor(n, e, Held(axis=(0.0, -1.0, 0.0)))),
    "drawer-close-v3": ("held", lambda n, e: held_actor(
        n, e, Held(axis=(0.0, 1.0, 0.0), dz=-0.01, grab=-1.0))),
    "window-open-v3": ("held", lambda n, e: held_actor(n, e, Held(axis=(1.0, 0.0, 0.0)))),
    "window-close-v3": ("held", lambda n, e: held_actor(n, e, Held(axis=(-1.0, 0.0, 0.0)))),
    "peg-insert-side-v3": ("tail grip", lambda n, e: scripted_actor(n, e, grip_shift=0.06)),
}


def random_actor(env: MetaWorldTaskEnv, seed: int, index: int) -> Action:
    """Uniform random actions from a generator seeded by (seed, task index)."""
    rng = np.random.default_rng((seed, index))
    low, high = env.action_space.low, env.action_space.high
    return lambda obs: rng.uniform(low, high).astype(np.float32)


def run_episode(env: MetaWorldTaskEnv, act: Action, steps: int,
                stop_at_success: bool = False) -> Episode:
    """One episode of ``act`` in ``env``, ``steps`` long (or up to its first success)."""
    obs, _ = env.reset()
    inner = _meta_world(env)
    digest = hashlib.sha256(obs.tobytes())
    rewards, success, near = [], [], []
    for _ in range(steps):
        obs, _, _, _, info = env.step(act(obs))
        digest.update(obs.tobytes())
        rewards.append(info["raw_reward"])
        success.append(info["success"] > 0)
        near.append(float(np.linalg.norm(inner.tcp_center - obs[4:7])) < NEAR)
        if stop_at_success and success[-1]:
            break
    return Episode(np.array(rewards), np.array(success), np.array(near), digest.hexdigest())


def policies(name: str) -> dict[str, Callable[[MetaWorldTaskEnv], Action]]:
    """The policies checked on task ``name``: the scripted one and its variant if it has one."""
    out: dict[str, Callable[[MetaWorldTaskEnv], Action]] = {
        "scripted": lambda env: scripted_actor(name, env)}
    if name in VARIANTS:
        label, make = VARIANTS[name]
        out[label] = lambda env: make(name, env)
    return out


def task_episodes(name: str, goals: tuple, seed: int, index: int,
                  version: str) -> tuple[Episode, dict[str, tuple[Episode, Episode | None]]]:
    """The random episode and, per policy, its episode and, where that fails within
    ``EPISODE`` steps, its retry of ``LONG_EPISODE`` steps (None where it succeeded)."""
    env = task_env(name, goals, seed, index, version)
    try:
        rand = run_episode(env, random_actor(env, seed, index), EPISODE)
        episodes = {p: run_episode(env, make(env), EPISODE) for p, make in policies(name).items()}
    finally:
        env.close()
    out: dict[str, tuple[Episode, Episode | None]] = {}
    for p, make in policies(name).items():
        long = None
        if episodes[p].first_success is None:
            env = task_env(name, goals, seed, index, version, LONG_EPISODE)
            try:
                long = run_episode(env, make(env), LONG_EPISODE, stop_at_success=True)
            finally:
                env.close()
        out[p] = (episodes[p], long)
    return rand, out


def _progress_corr(ep: Episode) -> float:
    """Rank correlation of the reward with the step, from the start to the first success (the
    scripted policies move monotonically through their phases, so the step is their progress)."""
    first = ep.first_success
    if first is None or first < 3:
        return float("nan")
    r = pd.Series(ep.rewards[:first])
    if r.nunique() < 2:
        return float("nan")
    return float(r.rank().corr(pd.Series(np.arange(first, dtype=float))))


def _mean(values: list[float]) -> float:
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else float("nan")


def summarise(eps: list[Episode], rand: list[Episode],
              long: list[Episode | None]) -> dict[str, Any]:
    """The figures of one policy on one task under one reward version, over its episodes
    ``eps``, beside the random episodes ``rand`` on the same goals."""
    n = len(eps)
    firsts = [ep.first_success for ep in eps]
    wins = [f for f in firsts if f is not None]
    long_wins = [f if f is not None else lg.first_success
                 for f, lg in zip(firsts, long) if f is not None or lg.first_success is not None]
    random_curve = np.mean([ep.rewards for ep in rand], axis=0)
    at_success, peak_before, rises = [], [], []
    for ep in eps:
        first = ep.first_success
        if first is None:
            continue
        at = float(ep.rewards[first - 1:first - 1 + WINDOW].mean())
        before = ep.rewards[:first - 1]
        start = float(ep.rewards[:WINDOW].mean())
        peak = (float(pd.Series(before).rolling(WINDOW).mean().max()) if before.size >= WINDOW
                else start)
        span = float(ep.rewards.max() - ep.rewards.min())
        at_success.append(at)
        peak_before.append(peak)
        rises.append(at > start and at >= peak - FLAT * span)
    return {
        "episodes": n,
        "success": len(wins) / n,
        "first_success": _mean([float(f) for f in wins]),
        "first_success_max": float(max(wins)) if wins else float("nan"),
        "success_500": len(long_wins) / n,
        "first_success_500": _mean([float(f) for f in long_wins]),
        "reward": _mean([float(ep.rewards.mean()) for ep in eps]),
        "reward_random": _mean([float(ep.rewards.mean()) for ep in rand]),
        "return": _mean([float(ep.rewards.sum()) for ep in eps]),
        "return_random": _mean([float(ep.rewards.sum()) for ep in rand]),
        "return_gain": _mean([float(e.rewards.sum() - r.rewards.sum())
                              for e, r in zip(eps, rand)]),
        "steps_above_random": _mean([float((ep.rewards > random_curve).mean()) for ep in eps]),
        "reward_start": _mean([float(ep.rewards[:WINDOW].mean()) for ep in eps]),
        "reward_peak_before_success": _mean(peak_before),
        "reward_at_success": _mean(at_success),
        "reward_end": _mean([float(ep.rewards[-WINDOW:].mean()) for ep in eps]),
        "rises_to_success": (sum(rises) / len(rises)) if rises else float("nan"),
        "progress_corr": _mean([_progress_corr(ep) for ep in eps]),
        "near_share": _mean([float(ep.near.mean()) for ep in eps]),
    }


def mt10_names() -> list[str]:
    """MT10's task names in the benchmark's order."""
    from metaworld.env_dict import MT10_V3

    return list(MT10_V3)


def check(seed: int = 1, episodes: int = 5, tasks: list[str] | None = None,
          progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The record: one row per (task, policy, reward version), tasks in MT10's order (or
    ``tasks``), over ``episodes`` goals (run seeds ``seed`` ... ``seed + episodes - 1``)."""
    sets: list[TaskSet] = [load_tasks(BENCHMARK, seed + k, TASK_CACHE) for k in range(episodes)]
    names = list(sets[0].names) if tasks is None else tasks
    rows = []
    with warnings.catch_warnings():
        # The scripted policies warn that their gains exceed the action range; the actions are
        # clipped to it (scripted_actor), as the environment would.
        warnings.filterwarnings("ignore", message="Constant\\(s\\) may be too high")
        for name in names:
            index = sets[0].names.index(name)
            runs = {v: [task_episodes(name, ts.goals[index], seed + k, index, v)
                        for k, ts in enumerate(sets)] for v in VERSIONS}
            for p in policies(name):
                # The policies read the state only, so both versions should step through the
                # same states; a success that differs between them is the success test's doing.
                same = all(a[1][p][0].digest == b[1][p][0].digest and a[0].digest == b[0].digest
                           for a, b in zip(*runs.values()))
                for v in VERSIONS:
                    rand = [r for r, _ in runs[v]]
                    eps = [by[p][0] for _, by in runs[v]]
                    long = [by[p][1] for _, by in runs[v]]
                    rows.append({"task": name, "policy": p, "reward_version": v,
                                 **summarise(eps, rand, long), "same_trajectory": same})
            if progress is not None:
                progress(name)
    return pd.DataFrame(rows)


def _num(x: float, spec: str | None = None) -> str:
    """``x`` for a reader: a dash where undefined; by default three significant digits, and
    whole numbers with thousands separators from 100 up (the v1 rewards reach thousands)."""
    if x is None or np.isnan(x):
        return "–"
    if spec is None:
        spec = ",.0f" if abs(x) >= 100 else ".3g"
    return format(x, spec)


def _count(share: float, n: int) -> str:
    return f"{round(share * n)}/{n}"


def _problems(r: pd.Series, n: int) -> list[str]:
    """What is wrong in one row (a policy under a reward version), as phrases."""
    v = r["reward_version"]
    out = []
    if r["success"] < 1:
        text = f"{v}: succeeds in {_count(r['success'], n)}"
        if r["success_500"] > r["success"]:
            text += (f" ({_count(r['success_500'], n)} within {LONG_EPISODE} steps, first at "
                     f"step {_num(r['first_success_500'], '.0f')})")
        out.append(text)
    if r["reward"] <= r["reward_random"]:
        out.append(f"{v}: reward per step {_num(r['reward'])} not above random's "
                   f"{_num(r['reward_random'])}")
    elif r["steps_above_random"] < 0.5:
        out.append(f"{v}: reward above random's on {r['steps_above_random']:.0%} of steps only")
    if r["success"] > 0 and r["rises_to_success"] < 1:
        out.append(f"{v}: reward at success {_num(r['reward_at_success'])} below its peak "
                   f"before success {_num(r['reward_peak_before_success'])}")
    return out


def verdict(task: str, rows: pd.DataFrame) -> str:
    """One line on ``task`` from its rows: healthy, or what is wrong, per policy."""
    n = int(rows["episodes"].iloc[0])
    parts = []
    for policy, prows in rows.groupby("policy", sort=False):
        by = {r["reward_version"]: r for _, r in prows.iterrows()}
        problems = [p for v in VERSIONS for p in _problems(by[v], n)]
        if bool(prows["same_trajectory"].iloc[0]) and by["v1"]["success"] != by["v2"]["success"]:
            problems.append(f"the same trajectories succeed in {_count(by['v2']['success'], n)}"
                            f" under v2 and {_count(by['v1']['success'], n)} under v1: the "
                            "success test depends on the reward version")
        firsts = "/".join(_num(by[v]["first_success"], ".0f") for v in VERSIONS)
        if problems:
            parts.append(f"{policy}: " + "; ".join(problems))
        else:
            parts.append(f"{policy}: healthy (succeeds every episode, first at step {firsts} "
                         "v1/v2; reward above random's and rising to success under both)")
    return f"**{task}**: " + ". ".join(parts) + "."


COLUMNS = [  # (column, markdown header, format: None a count of episodes, "" a reward)
    ("success", "success", None), ("first_success", "first success", ".0f"),
    ("first_success_max", "latest", ".0f"), ("success_500", "success in 500", None),
    ("reward", "reward/step", ""), ("reward_random", "random's", ""),
    ("return_gain", "return gain", ""), ("steps_above_random", "steps above random", ".0%"),
    ("reward_start", "start", ""), ("reward_peak_before_success", "peak before success", ""),
    ("reward_at_success", "at success", ""), ("reward_end", "end", ""),
    ("progress_corr", "corr(reward, step)", ".2f"), ("near_share", "fingers < 5 cm", ".0%"),
]


def table_lines(frame: pd.DataFrame) -> list[str]:
    """The record as markdown table lines."""
    heads = ["task", "policy", "reward"] + [h for _, h, _ in COLUMNS]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for _, r in frame.iterrows():
        n = int(r["episodes"])
        cells = [r["task"], r["policy"], r["reward_version"]]
        for col, _, spec in COLUMNS:
            cells.append(_count(r[col], n) if spec is None else _num(r[col], spec or None))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(frame: pd.DataFrame, seed: int, episodes: int) -> str:
    """``reward_check.md``: how it was made, the table, one verdict per task."""
    from importlib.metadata import version

    tasks = list(dict.fromkeys(frame["task"]))
    only = "" if tasks == mt10_names() else "".join(f" --task {t}" for t in tasks)
    what = "every MT10 task" if not only else "MT10's " + ", ".join(tasks)
    seeds = f"{seed}" if episodes == 1 else f"{seed}-{seed + episodes - 1}"
    same = ("yes, for every task and policy" if bool(frame["same_trajectory"].all())
            else "not for every task; see the `same_trajectory` column of the CSV")
    head = [
        "# Reward check: Meta-World's scripted policies against a random one, v1 and v2 rewards",
        "",
        f"`python -m ptsl.tools.reward_check --episodes {episodes} --seed {seed}{only}` "
        f"(Meta-World {version('metaworld')}, MuJoCo {version('mujoco')}): {what} through this "
        "project's environment (`MetaWorldTaskEnv`), the goal the reference protocol draws for "
        f"run seeds {seeds} (one episode per seed and policy), {EPISODE}-step episodes, the raw "
        "reward. *scripted* is Meta-World's scripted policy; *held* (the handle tasks) takes "
        "the scripted approach, then holds the fingers' centre at the handle and pushes it "
        "toward the goal; *tail grip* (peg-insert-side) is the scripted policy gripping the peg "
        "6 cm nearer its tail. *success* counts episodes with success at any step, *first "
        f"success* and *latest* the mean and the latest first-success step; *success in "
        f"{LONG_EPISODE}* retries a failed episode {LONG_EPISODE} steps long; *random's* is the "
        "random policy's reward per step on the same goals; *return gain* the return minus the "
        "random one; *steps above random* the share of steps where the reward beats the random "
        "policy's mean at that step; *start*, *peak before success*, *at success* and *end* are "
        f"{WINDOW}-step means of the reward at the start, at their highest before the first "
        "success, from it and over the last steps; *corr* is the rank correlation of reward with "
        "the step up to the first success; *fingers < 5 cm* the share of steps the fingers' "
        "centre is within 5 cm of the object position, the reach gate of the handle and peg "
        f"tasks' v1 rewards. Both reward versions step through the same states: {same}. "
        "`python -m ptsl.tools.reward_check --help` says more.",
        "",
    ]
    verdicts = ["", "## Verdict per task", ""]
    for task, rows in frame.groupby("task", sort=False):
        verdicts.append(f"- {verdict(str(task), rows)}")
    return "\n".join(head + table_lines(frame) + verdicts) + "\n"


class _Parser(ArgumentParser):
    """The commands' parser with bad input reported on one line, naming what is allowed, and
    exit status 2."""

    def error(self, message: str) -> NoReturn:
        if "allowed" not in message:  # an unknown flag or a missing value
            message += (f"; allowed: --episodes N (>= 1), --seed S (0 to {MAX_SEED}), "
                        "--task TASK, --out FOLDER")
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m ptsl.tools.reward_check", description=__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=whole(1), default=5, metavar="N",
                    help="goals per task: run seeds S ... S+N-1, one episode per seed and "
                         "policy (default 5)")
    ap.add_argument("--seed", type=whole(0, MAX_SEED), default=1, metavar="S",
                    help="first run seed (default 1)")
    ap.add_argument("--task", action="append", default=[], metavar="TASK",
                    help="check only this MT10 task (repeatable; default: all ten)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), metavar="FOLDER",
                    help=f"folder for reward_check.csv and reward_check.md (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    if args.seed + args.episodes - 1 > MAX_SEED:  # the run seeds S ... S+N-1
        ap.error(f"argument --episodes: {args.episodes} from --seed {args.seed} passes seed "
                 f"{MAX_SEED}; allowed: at most {MAX_SEED - args.seed + 1}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        ap.error(f"argument --out: {args.out!r} is a file; allowed: a folder (new or existing)")
    names = mt10_names()
    for name in args.task:
        if name not in names:
            ap.error(f"argument --task: {name!r}; allowed: {', '.join(names)}")
    t0 = time.perf_counter()
    frame = check(args.seed, args.episodes, [n for n in names if n in args.task] or None,
                  progress=lambda name: print(f"{name:<26} done {time.perf_counter() - t0:6.1f} s",
                                              flush=True))
    text = markdown(frame, args.seed, args.episodes)
    print()
    print("\n".join(table_lines(frame)))
    print("\n".join(line for line in text.splitlines() if line.startswith("- ")))
    write_atomic(out / "reward_check.csv", frame.to_csv(index=False, float_format="%.6g"))
    write_atomic(out / "reward_check.md", text)
    print(f"\n{len(frame)} rows in {time.perf_counter() - t0:.0f} s; wrote {out}/reward_check.csv "
          f"and {out}/reward_check.md")
    return 0


if __name__ == "__main__":
    run(main)
