"""The training loop: collect, update, evaluate periodically, checkpoint for resume.

Order of operations per vector step follows the reference (doc 1.3): evaluate when due; act
(uniform random for the first ``init_steps`` vector steps, then a stochastic policy sample); from
``init_steps`` on update (``init_steps`` updates at once, then one per vector step); step every
task; store one transition per task. Deliberate difference: the time-limit transition stores the
true next observation with ``not_done = 1`` (the reference stores the next episode's reset
observation there); then all tasks are reset.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import faults
from .agent import MultiTaskSAC, TrainingDiverged, check_losses
from .buffer import make_buffer
from .config import RunConfig
from .envs import MultiTaskVecEnv, load_tasks
from .evaluate import evaluate
from .io import CorruptFileError, WriteError
from .methods import Shapes, build_agent
from .runtime import Runtime
from .tracking import NullTracker, Tracker


@dataclass(frozen=True)
class TrainResult:
    """What a finished run produced."""

    agent: MultiTaskSAC
    curve: pd.DataFrame  # one row per evaluation: step, success, return, success/<task>...
    parameter_count: int
    wall_seconds: float
    resumed_from: int


def _eval_row(step: int, agent: MultiTaskSAC, env: MultiTaskVecEnv, episodes: int,
              transitions: int) -> dict[str, float]:
    res = evaluate(agent, env, episodes)
    row: dict[str, float] = {"step": step, "env_steps": transitions,
                             "success": res.mean_success, "return": res.mean_return}
    for name, s in zip(env.tasks.names, res.success):
        row[f"success/{name}"] = float(s)
    return row


class ResumeCheckpoints:
    """Resume state in the ignored scratch folder: ``<exp>-<seed>-<config key>-<step>.pt``.

    Files are weights-only with a checksum (:mod:`ptsl.artifacts`). A new checkpoint gets a new
    name and the older one is deleted only after it is complete, so a kill or a full disk while
    writing leaves the previous checkpoint intact. Loading takes the newest one that verifies;
    a corrupt one, or one written by another project version, is skipped with a warning line,
    and checkpoints of the same run under another config are named with the fields that differ.
    """

    def __init__(self, scratch_dir: Path | None, cfg: RunConfig) -> None:
        self.dir = None if scratch_dir is None else Path(scratch_dir)
        self.run = f"{cfg.name}-{cfg.seed}-"
        self.stem = f"{self.run}{cfg.key()}-"
        self.config = cfg.to_dict()

    def _files(self, prefix: str) -> list[Path]:
        if self.dir is None or not self.dir.is_dir():
            return []
        return sorted((p for p in self.dir.glob(f"{prefix}*.pt") if p.stem[-9:].isdigit()),
                      key=lambda p: p.stem[-9:], reverse=True)

    def load(self) -> dict[str, Any] | None:
        """The newest usable checkpoint of this run and config, or None."""
        from .artifacts import differences, load, project_version

        for path in self._files(self.stem):
            try:
                state = load(path, "resume checkpoint")
            except CorruptFileError as exc:
                print(f"warning: {exc}; trying an older one", file=sys.stderr)
                continue
            why = []
            if state["ptsl_version"] != project_version():
                why = [f"ptsl_version: {state['ptsl_version']!r} there, "
                       f"{project_version()!r} here"]
            why += differences(state["config"], self.config, "config")
            if why:
                print(f"warning: {path}: not resuming from this checkpoint, it was made "
                      f"under another {'; '.join(why)}", file=sys.stderr)
                continue
            return state
        for path in self._files(self.run)[:1]:
            if not path.name.startswith(self.stem):
                print(f"note: {path} is a checkpoint of {self.run[:-1]} under another config "
                      "(its name carries the config key); this run starts from scratch",
                      file=sys.stderr)
        return None

    def save(self, step: int, state: dict[str, Any]) -> None:
        """Write the checkpoint of ``step``, then delete the older ones of this run."""
        if self.dir is None:
            return
        from .artifacts import save

        path = self.dir / f"{self.stem}{step:09d}.pt"
        save(path, {"config": self.config, "step": step, **state}, "resume checkpoint",
             fault_point="checkpoint")
        for old in self._files(self.stem):
            if old != path:
                self._unlink(old)
        self._clean()

    def remove(self) -> None:
        """Delete this run's checkpoints (the run finished)."""
        for path in self._files(self.stem):
            self._unlink(path)
        self._clean()

    def _clean(self) -> None:
        """Temp files and lone checksums left by a write that was killed or failed."""
        if self.dir is None or not self.dir.is_dir():
            return
        for stale in self.dir.glob(f".{self.stem}*.tmp"):
            stale.unlink(missing_ok=True)
        for sums in self.dir.glob(f"{self.stem}*.pt.sha256"):
            if not sums.with_suffix("").exists():
                sums.unlink(missing_ok=True)

    @staticmethod
    def _unlink(path: Path) -> None:
        from .artifacts import checksum_path

        path.unlink(missing_ok=True)
        checksum_path(path).unlink(missing_ok=True)


def _check_weights(agent: MultiTaskSAC, step: int) -> None:
    """No checkpoint or output of a broken model: every weight must be finite."""
    for name, tensor in agent.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise TrainingDiverged(f"training stopped at step {step}: weight {name} is not "
                                   "finite; nothing was saved")


def train(cfg: RunConfig, *, scratch_dir: Path | None = None, task_cache: Path | None = None,
          tracker: Tracker | None = None, progress: bool = True, runtime: Runtime | None = None,
          on_eval: Callable[[dict[str, float]], None] | None = None,
          on_step: Callable[[int], None] | None = None,
          keep_checkpoint: bool = False) -> TrainResult:
    """Train one (experiment, seed) run to ``cfg.train.steps`` vector steps.

    If a scratch checkpoint for this exact config exists (an interrupted earlier attempt), the
    run resumes from it. Raises :class:`ptsl.agent.TrainingDiverged` on a loss blow-up.
    ``runtime`` (device, threads, update path) defaults to :meth:`Runtime.from_env`.
    ``on_eval`` gets each evaluation's curve row; ``on_step`` the number of vector steps done
    after each one (progress views, throughput measurements). The scratch checkpoint is removed
    at the end unless ``keep_checkpoint`` (the stage removes it once its outputs are written, so
    a kill while writing them resumes from the last checkpoint).
    """
    tracker = tracker or NullTracker()
    t0 = time.perf_counter()
    tc, sac = cfg.train, cfg.sac
    runtime = runtime or Runtime.from_env()
    runtime.apply()
    device = runtime.torch_device()
    tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, task_cache)
    env = MultiTaskVecEnv(tasks, cfg.env, cfg.seed)
    # A separate evaluation env with the same goals (upstream mtrl; PTSL's HEAD reuses the
    # training env, reference quirk Q1). Its rewards are reported raw.
    eval_env = MultiTaskVecEnv(tasks, cfg.env, cfg.seed, normalize_reward=False, vector="sync")
    shapes = Shapes(env.obs_dim, env.action_dim, env.num_tasks)
    agent = build_agent(cfg, shapes, tasks.names, device=device)
    agent.fast_path = runtime.fast
    buffer = make_buffer(sac.buffer_capacity, env.obs_dim, env.action_dim, device,
                         seed=cfg.seed + 2, fast=runtime.fast)
    rng = np.random.default_rng(cfg.seed)
    checkpoint = ResumeCheckpoints(scratch_dir, cfg)
    curve: list[dict[str, float]] = []
    start = 0
    state = checkpoint.load()
    if state is not None:
        agent.load_training_state(state["agent"])
        buffer.load_state_dict(state["buffer"])
        rng.bit_generator.state = state["rng"]
        env.set_state(state["env"])
        curve = state["curve"]
        start = state["step"]
        tracker.resumed(start, curve, state.get("mlflow_run_id"))
    last_checkpoint = start
    obs = env.reset()
    # Losses stay on the device; they are checked and averaged once per episode (one host
    # transfer per episode_length updates), and before any checkpoint is written.
    losses: list[tuple[int, dict[str, torch.Tensor]]] = []
    guard = sac.critic_loss_guard
    bar = tqdm(total=tc.steps, initial=start, disable=not progress, unit="step",
               desc=f"{cfg.name}-{cfg.seed}", mininterval=2.0, dynamic_ncols=True)
    try:
        for step in range(start, tc.steps):
            if step % tc.eval_every == 0 and not (curve and curve[-1]["step"] == step):
                row = _eval_row(step, agent, eval_env, tc.eval_episodes, step * env.num_tasks)
                curve.append(row)
                tracker.log_metrics({f"eval/{k}": v for k, v in row.items() if k != "step"}, step)
                tracker.flush()  # the curve reaches the store at every evaluation
                bar.set_postfix(success=f"{row['success']:.2f}")
                if on_eval:
                    on_eval(row)
            # The action is chosen before the update (reference order), so on the fast path the
            # environments step while the update runs: step_async, update, step_wait.
            updating = step >= sac.init_steps
            if updating:
                action = agent.act(obs, env.task_ids, deterministic=False)
            else:
                action = env.sample_actions(rng)
                faults.point("warmup")
            # Only an update is worth overlapping; the plain path and the warm-up step in this
            # thread, the plain path after its update.
            overlap = runtime.fast and updating
            if overlap:
                env.step_async(action)
            if updating:
                n_updates = sac.init_steps if step == sac.init_steps else 1
                for _ in range(n_updates):
                    losses.append((step, agent.update(buffer.sample(sac.batch_size, rng, device),
                                                      step)))
                    faults.point("update")
            res = env.step_wait() if overlap else env.step(action)
            if faults.nan_reward(step):
                res.reward[:] = np.nan
            buffer.add(obs, action, res.reward, res.obs, 1.0 - res.terminated, env.task_ids)
            obs = res.obs
            bar.update(1)
            done = step + 1
            if on_step:
                on_step(done)
            if res.truncated:
                obs = env.reset()
                if losses:
                    means = check_losses(losses, guard)
                    tracker.log_metrics({f"train/{k}": v for k, v in means.items()}, done)
                    losses = []
                if done - last_checkpoint >= tc.checkpoint_every and done < tc.steps:
                    _check_weights(agent, done)
                    checkpoint.save(done, {
                        "agent": agent.training_state(), "buffer": buffer.state_dict(),
                        "rng": rng.bit_generator.state, "env": env.get_state(), "curve": curve,
                        "mlflow_run_id": tracker.run_id})
                    last_checkpoint = done
        check_losses(losses, guard)  # a run that ends mid-episode is checked before it is saved
        _check_weights(agent, tc.steps)
        if not (curve and curve[-1]["step"] == tc.steps):
            row = _eval_row(tc.steps, agent, eval_env, tc.eval_episodes, tc.steps * env.num_tasks)
            curve.append(row)
            tracker.log_metrics({f"eval/{k}": v for k, v in row.items() if k != "step"}, tc.steps)
            tracker.flush()
            if on_eval:
                on_eval(row)
    finally:
        bar.close()
        env.close()
        eval_env.close()
        tracker.flush()
    if not keep_checkpoint:
        checkpoint.remove()
    return TrainResult(agent=agent, curve=pd.DataFrame(curve),
                       parameter_count=agent.parameter_count(),
                       wall_seconds=time.perf_counter() - t0, resumed_from=start)


def write_run_outputs(result: TrainResult, out_dir: Path, extra: dict[str, Any]) -> None:
    """Write model.pt (+ model.pt.sha256), curve.csv and summary.json into ``out_dir``.

    Everything goes to a temp sibling folder first, which is renamed into place at the end, so an
    interrupted stage never leaves a half-written output, and a failed write (full disk) raises
    :class:`ptsl.io.WriteError` leaving nothing behind. Every byte is a function of the config
    and seed (no wall time, no resume step), so a rerun reproduces the DVC hash; what varies
    between runs goes to MLflow.
    """
    import json

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    final = result.curve.iloc[-1]
    summary = {"final_step": int(final["step"]), "final_success": float(final["success"]),
               "parameter_count": result.parameter_count, **extra}
    try:
        tmp.mkdir(parents=True)
        result.agent.save(tmp / "model.pt")
        result.curve.to_csv(tmp / "curve.csv", index=False)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        faults.point("outputs")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WriteError(out_dir, "training outputs",
                         OSError(exc.errno, os.strerror(exc.errno) if exc.errno else str(exc))
                         ) from None
