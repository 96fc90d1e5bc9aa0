"""The training loop: collect, update, evaluate, checkpoint.

Each vector step follows the reference (reference 1.3): evaluate when due; act (uniform random
for the first ``init_steps`` vector steps, then a stochastic policy sample); from ``init_steps`` on
update (``init_steps`` updates at once, then one per vector step); step every task; store one
transition per task. Deliberate difference: the time-limit transition stores the true next
observation with ``not_done = 1`` (the reference stores the next episode's reset observation
there); then all tasks are reset. The action is chosen before the update, so the environments
step while the update runs (``step_async``, update, ``step_wait``): the same transitions either
way. The losses stay on the device and are checked once per episode.

On CPU an update samples its batch on the host (:meth:`ReplayBuffer.sample`); on CUDA the run
makes one call into :mod:`ptsl.core.cuda`, which keeps the buffer on the device and replays the
update as a CUDA graph.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import faults
from .agent.buffer import ReplayBuffer
from .agent.builders import Shapes, build_agent
from .agent.sac import MultiTaskSAC, check_losses
from .config import RunConfig
from .envs import MultiTaskVecEnv, StepResult, load_tasks
from .errors import TrainingDiverged
from .evaluation import evaluate, evaluator
from .files import folder_aside
from .log import NoLog, RunLog
from .persistence import ResumeCheckpoints, save_agent
from .records import Curve, Summary
from .runtime import Runtime


class TrainingSuccess:
    """Training success as the reference logs it (``train/success``): each task's success at
    any step of each training episode, under the behaviour policy (random actions during the
    warm-up, then stochastic policy samples). Finished episodes wait here until the next
    evaluation row takes their per-task rates (a windowed rate: at the paper budget 66 or 67
    episodes per task per row)."""

    def __init__(self, num_tasks: int) -> None:
        self.current = np.zeros(num_tasks, dtype=bool)
        self.finished: list[np.ndarray] = []

    def step(self, success: np.ndarray) -> None:
        self.current |= success > 0

    def end_episode(self) -> np.ndarray:
        """The episode's success per task (0 or 1); a new episode starts."""
        done = self.current.astype(np.float64)
        self.finished.append(done)
        self.current = np.zeros_like(self.current)
        return done

    def take_window(self) -> tuple[int, np.ndarray | None]:
        """How many episodes per task finished since the last call, and each task's success
        rate over them (None when none did)."""
        finished, self.finished = self.finished, []
        return len(finished), (np.stack(finished).mean(axis=0) if finished else None)

    def state(self) -> dict:
        return {"current": self.current.copy(), "finished": [f.copy() for f in self.finished]}

    def load_state(self, state: dict) -> None:
        self.current = np.asarray(state["current"], dtype=bool).copy()
        self.finished = [np.asarray(f, dtype=np.float64) for f in state["finished"]]


@dataclass(frozen=True)
class TrainResult:
    """What a finished run produced."""

    agent: MultiTaskSAC
    curve: pd.DataFrame  # one row per evaluation (:class:`ptsl.core.records.Curve`)
    parameter_count: int
    wall_seconds: float
    resumed_from: int


class Training:
    """One run in progress: its environments, agent, replay buffer, random generator and what it
    has recorded so far. :meth:`run` is the loop over :meth:`step`."""

    def __init__(self, cfg: RunConfig, runtime: Runtime, task_cache: Path | None,
                 checkpoints: ResumeCheckpoints, log: RunLog) -> None:
        self.cfg, self.runtime, self.log, self.checkpoints = cfg, runtime, log, checkpoints
        self.device = runtime.torch_device()
        tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, task_cache)
        self.env = MultiTaskVecEnv(tasks, cfg.env, cfg.seed,
                                   vector=runtime.vector_mode(tasks.num_tasks))
        self.eval_env = evaluator(tasks, cfg.env, cfg.seed,
                                  runtime.eval_workers(tasks.num_tasks))
        shapes = Shapes(self.env.obs_dim, self.env.action_dim, self.env.num_tasks)
        self.agent = build_agent(cfg, shapes, tasks.names, device=self.device)
        self.agent.blocking_wait = runtime.wait == "block"
        self.rng = np.random.default_rng(cfg.seed)
        #: The batch and buffer sizes in total over the tasks (``sac.sizes_per_task``).
        self.sizes = cfg.sac.totals(tasks.num_tasks)
        #: How updates run here: ``host``, or on CUDA ``captured`` / ``static``.
        self.update_path = runtime.update_path(self.device)
        if self.update_path == "host":
            self.buffer = ReplayBuffer(self.sizes.buffer_capacity, shapes.obs_dim,
                                       shapes.action_dim)
            self.update = self.update_on_host
        else:
            from .cuda import accelerate  # the GPU path: device buffer, static step, CUDA graph

            self.buffer, self.update = accelerate(self.agent, self.sizes, shapes.obs_dim,
                                                  shapes.action_dim, seed=cfg.seed + 2,
                                                  graph=runtime.graph)
        self.curve: list[dict[str, float]] = []
        self.train_success = TrainingSuccess(self.env.num_tasks)
        # Losses stay on the device; they are checked and averaged once per episode (one host
        # transfer per episode_length updates), and before any checkpoint is written.
        self.losses: list[tuple[int, dict[str, torch.Tensor]]] = []
        self.start = self.last_checkpoint = 0
        self.eval_interval = cfg.train.eval_interval
        self.bar: tqdm | None = None  # :meth:`open` makes it

    def resume(self) -> None:
        """Continue from the newest checkpoint of this run and config, if there is one."""
        state = self.checkpoints.load(self.device.type)
        if state is None:
            return
        if "train_success" not in state:
            print(f"warning: not resuming {self.cfg.name}-{self.cfg.seed} from its step "
                  f"{state['step']} checkpoint: it predates training-success recording; this "
                  "run starts from scratch", file=sys.stderr)
            return
        self.agent.load_training_state(state["agent"])
        self.buffer.load_state_dict(state["buffer"])
        self.rng.bit_generator.state = state["rng"]
        self.env.set_state(state["env"])
        self.curve = state["curve"]
        self.train_success.load_state(state["train_success"])
        self.start = self.last_checkpoint = state["step"]
        self.log.resumed(self.start, self.curve, state.get("log_run_id"))

    def run(self, progress: bool, on_eval: Callable[[dict[str, float]], None] | None,
            on_step: Callable[[int], None] | None) -> None:
        """Train from :attr:`start` to ``train.steps`` vector steps."""
        try:
            self.open(progress)
            for step in range(self.start, self.cfg.train.steps):
                self.step(step, on_eval, on_step)
            self.finish(on_eval)
        finally:
            self.close()

    def open(self, progress: bool) -> None:
        """The progress bar, and the first observations (a resumed run's checkpoint was written
        after the episode's reset drew its goals)."""
        tc = self.cfg.train
        self.bar = tqdm(total=tc.steps, initial=self.start, disable=not progress, unit="step",
                        desc=f"{self.cfg.name}-{self.cfg.seed}", mininterval=2.0,
                        dynamic_ncols=True)
        self.obs = self.env.reset(keep_goals=self.start > 0)

    def step(self, step: int, on_eval: Callable[[dict[str, float]], None] | None,
             on_step: Callable[[int], None] | None) -> None:
        """Vector step ``step``: evaluate when due; act; from ``init_steps`` on start the
        environments' step, update (``init_steps`` updates at the first such step, then one)
        and finish the step, so that the environments step while the update runs; store the
        transitions; end the episode when due."""
        sac = self.cfg.sac
        if step % self.eval_interval == 0:
            self.evaluate(step, on_eval, self.bar)
        updating = step >= sac.init_steps
        action = self.act(self.obs, updating)
        if updating:
            self.env.step_async(action)
            for _ in range(sac.init_steps if step == sac.init_steps else 1):
                self.losses.append((step, self.update()))
                faults.point("update")
            result = self.env.step_wait()
        else:  # the warm-up: nothing to overlap with, so the environments step in this thread
            result = self.env.step(action)
        if faults.nan_reward(step):
            result.reward[:] = np.nan
        self.collect(self.obs, action, result)
        self.obs = result.obs
        self.bar.update(1)
        if on_step:
            on_step(step + 1)
        if result.truncated:
            self.obs = self.end_episode(step + 1)

    def finish(self, on_eval: Callable[[dict[str, float]], None] | None) -> None:
        """After the last step: a run that ends mid-episode has its losses checked before it is
        saved, every weight checked, and the final evaluation."""
        steps = self.cfg.train.steps
        self.report_losses(steps)
        self.check_weights(steps)
        self.evaluate(steps, on_eval, self.bar)

    def close(self) -> None:
        """The progress bar and the environments closed, the log flushed."""
        if self.bar is not None:
            self.bar.close()
        self.env.close()
        self.eval_env.close()
        self.log.flush()

    # ------------------------------------------------------------------ the steps of the loop

    def evaluate(self, step: int, on_eval: Callable[[dict[str, float]], None] | None,
                 bar: tqdm) -> None:
        """Deterministic episodes of every task; the curve's row of ``step`` (once per step: a
        resumed run has the row of its checkpoint's step already)."""
        if self.curve and self.curve[-1]["step"] == step:
            return
        res = evaluate(self.agent, self.eval_env, self.cfg.train.eval_episodes)
        names = self.eval_env.tasks.names
        episodes, rates = self.train_success.take_window()
        row = Curve.row(step, step * self.env.num_tasks, res.mean_success, res.mean_return,
                        dict(zip(names, res.success)), episodes,
                        None if rates is None else dict(zip(names, rates.tolist())))
        self.curve.append(row)
        self.log.evaluation(step, row)
        self.log.flush()  # the curve reaches the store at every evaluation
        bar.set_postfix(success=f"{row['success']:.2f}")
        if on_eval:
            on_eval(row)

    def act(self, obs: np.ndarray, updating: bool) -> np.ndarray:
        """A stochastic policy sample, or uniform random actions during the warm-up."""
        if updating:
            return self.agent.act(obs, self.env.task_ids, deterministic=False)
        action = self.env.sample_actions(self.rng)
        faults.point("warmup")
        return action

    def update_on_host(self) -> dict[str, torch.Tensor]:
        """One update on a batch the replay buffer draws on the host from the run's own
        generator (the CPU path)."""
        return self.agent.update(self.buffer.sample(self.sizes.batch_size, self.rng, self.device))

    def collect(self, obs: np.ndarray, action: np.ndarray, result: StepResult) -> None:
        """Store one transition per task; note each task's success."""
        self.buffer.add(obs, action, result.reward, result.obs, 1.0 - result.terminated,
                        self.env.task_ids)
        self.train_success.step(result.success)

    def end_episode(self, done: int) -> np.ndarray:
        """Reset every task; report the episode's training success; check and report its
        losses; checkpoint when due. Returns the first observations of the next episode."""
        obs = self.env.reset()
        success = self.train_success.end_episode()
        self.log.training_episode(done, dict(zip(self.env.tasks.names, success.tolist())))
        self.report_losses(done)
        if done - self.last_checkpoint >= self.cfg.train.checkpoint_every \
                and done < self.cfg.train.steps:
            self.checkpoint(done)
        return obs

    def report_losses(self, done: int) -> None:
        """The divergence guard over the losses since the last report, and their means."""
        if self.losses:
            means = check_losses(self.losses, self.cfg.sac.critic_loss_guard,
                                 self.agent.blocking_wait)
            self.log.losses(done, means)
            self.losses = []

    def check_weights(self, step: int) -> None:
        """No checkpoint or output of a broken model: every weight must be finite."""
        for name, tensor in self.agent.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise TrainingDiverged(f"training stopped at step {step}: weight {name} is not "
                                       "finite; nothing was saved")

    def checkpoint(self, done: int) -> None:
        """Everything a resume needs, in the scratch folder."""
        self.check_weights(done)
        self.checkpoints.save(done, {
            "agent": self.agent.training_state(), "buffer": self.buffer.state_dict(),
            "rng": self.rng.bit_generator.state, "env": self.env.get_state(),
            "curve": self.curve, "train_success": self.train_success.state(),
            "log_run_id": self.log.run_id,
            "device": self.device.type, "update_path": self.update_path})
        self.last_checkpoint = done


def train(cfg: RunConfig, *, scratch_dir: Path | None = None, task_cache: Path | None = None,
          log: RunLog | None = None, progress: bool = True, runtime: Runtime | None = None,
          on_eval: Callable[[dict[str, float]], None] | None = None,
          on_step: Callable[[int], None] | None = None,
          keep_checkpoint: bool = False) -> TrainResult:
    """Train one (experiment, seed) run to ``cfg.train.steps`` vector steps.

    If a scratch checkpoint for this exact config exists in ``scratch_dir`` (an interrupted
    earlier attempt), the run resumes from it. Raises :class:`TrainingDiverged` on a loss
    blow-up. ``runtime`` (device, threads, graph capture) defaults to :meth:`Runtime.from_env`;
    ``log`` receives the curve and the losses as they come. ``on_eval`` gets each evaluation's
    curve row; ``on_step`` the number of vector steps done after each one (progress views,
    throughput measurements). The scratch checkpoint is removed at the end unless
    ``keep_checkpoint`` (the stage removes it once its outputs are written, so a kill while
    writing them resumes from the last checkpoint).
    """
    t0 = time.perf_counter()
    runtime = runtime or Runtime.from_env()
    runtime.apply()
    checkpoints = ResumeCheckpoints(scratch_dir, cfg)
    training = Training(cfg, runtime, task_cache, checkpoints, log or NoLog())
    training.resume()
    training.run(progress, on_eval, on_step)
    if not keep_checkpoint:
        checkpoints.remove()
    return TrainResult(agent=training.agent, curve=Curve.frame(training.curve),
                       parameter_count=training.agent.parameter_count(),
                       wall_seconds=time.perf_counter() - t0, resumed_from=training.start)


def write_outputs(cfg: RunConfig, result: TrainResult, out_dir: Path) -> None:
    """The training stage's outputs in ``out_dir``: ``model.pt`` (+ ``model.pt.sha256``),
    ``curve.csv`` and ``summary.json``.

    Built aside and swapped in whole (:func:`ptsl.core.files.folder_aside`): an interrupted stage
    never leaves a half-written output, and a failed write (full disk) raises
    :class:`~ptsl.core.errors.WriteError` leaving nothing behind. Every byte is a function of the
    config and seed (no wall time, no resume step), so a rerun reproduces the DVC hash; what
    varies between runs goes to the run's log.
    """
    final = result.curve.iloc[-1]
    summary = Summary(final_step=int(final["step"]), final_success=float(final["success"]),
                      parameter_count=result.parameter_count, experiment=cfg.name,
                      seed=cfg.seed, method=cfg.experiment.method,
                      benchmark=cfg.experiment.benchmark)
    with folder_aside(out_dir, "training outputs") as tmp:
        save_agent(result.agent, tmp / "model.pt")
        Curve.write(tmp / "curve.csv", result.curve)
        summary.write(tmp / "summary.json")
        faults.point("outputs")
