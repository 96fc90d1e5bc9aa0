"""Update throughput at paper size: every method's update run eagerly (and on CUDA captured as the
training loop runs it there), beside Stable-Baselines3's SAC training step with the same
networks, against the GEMM floor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from ...core.agent.buffer import ReplayBuffer
from ...core.agent.builders import Shapes, build_agent
from ...core.agent.sac import MultiTaskSAC
from ...core.benchmarks import ACTION_DIM, OBS_DIM
from ...core.methods import METHODS
from ...ops.params import Params, run_config
from .timing import Rates, Work, interleave

PAPER_BATCH = 1280
#: Rows of random transitions in every contender's replay buffer (host, device, SB3's).
BUFFER_ROWS = 20_000


def method_rows(params: Params) -> dict[str, tuple[str, str]]:
    """The benchmark's row of every method of the registry: method -> (label, its MT10
    experiment in params.yaml), e.g. ``mtsac -> ("MT-SAC 400x3", "mt10_mtsac")``."""
    rows = {}
    for name, m in METHODS.items():
        exp = run_config(params, f"mt10_{name}", 1).experiment
        rows[name] = (f"{m.label} {m.size(exp.hidden_dim, exp.num_layers, exp.pal_dim)}",
                      f"mt10_{name}")
    return rows


GEMM = "GEMM 1280x400 @ 400x400"


def gemm_work(device: torch.device, size: tuple[int, int, int] = (1280, 400, 400)) -> Work:
    """Matrix multiplies at the update's dominant shape (batch x hidden x hidden); its rate in
    FLOP/s is the GEMM floor's denominator. Timed among the updates, so that both see the same
    machine."""
    m, k, n = size
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, k, generator=g).to(device)
    b = torch.randn(k, n, generator=g).to(device)
    reps = 20 if device.type == "cpu" else 400

    def work() -> float:
        for _ in range(reps):
            torch.mm(a, b)
        _sync(device)
        return 2.0 * m * k * n * reps

    return work


def random_buffer(num_tasks: int, size: int = BUFFER_ROWS, seed: int = 0,
                  buf: Any = None) -> Any:
    """``buf`` (default: a new host buffer of ``size``) filled with ``size`` random transitions:
    the update's cost does not depend on the values."""
    rng = np.random.default_rng(seed)
    buf = ReplayBuffer(size, OBS_DIM, ACTION_DIM) if buf is None else buf
    buf.add(rng.normal(size=(size, OBS_DIM)).astype(np.float32),
            rng.uniform(-1, 1, size=(size, ACTION_DIM)).astype(np.float32),
            rng.normal(size=size), rng.normal(size=(size, OBS_DIM)).astype(np.float32),
            np.ones(size), rng.integers(0, num_tasks, size=size))
    return buf


def paper_agent(params: Params, experiment: str, task_names: tuple[str, ...],
                device: torch.device) -> MultiTaskSAC:
    """The agent of ``experiment`` at the paper's sizes and batch, on ``device``."""
    cfg = run_config(params, experiment, 1)
    cfg = cfg.model_copy(update={"sac": cfg.sac.model_copy(update={"batch_size": PAPER_BATCH})})
    return build_agent(cfg, Shapes(OBS_DIM, ACTION_DIM, len(task_names)), task_names, device)


def captured_update(params: Params, experiment: str, task_names: tuple[str, ...],
                    device: torch.device) -> Callable[[], Any]:
    """The training loop's CUDA update of ``experiment`` at paper size: the static step on a
    device buffer of random rows, replayed as a CUDA graph (:func:`ptsl.core.cuda.accelerate`)."""
    from ...core.cuda import accelerate

    agent = paper_agent(params, experiment, task_names, device)
    sac = agent.sac.model_copy(update={"buffer_capacity": BUFFER_ROWS})
    buffer, update = accelerate(agent, sac, OBS_DIM, ACTION_DIM, seed=0, graph=True)
    random_buffer(len(task_names), buf=buffer)
    return update


def _captured_work(step: Callable[[], Any], device: torch.device, updates: int) -> Work:
    def work() -> float:
        for _ in range(updates):
            step()
        _sync(device)
        return updates

    return work


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _update_work(agent: MultiTaskSAC, buffer: ReplayBuffer, device: torch.device,
                 updates: int, seed: int) -> Work:
    rng = np.random.default_rng(seed)

    def work() -> float:
        for _ in range(updates):
            agent.update(buffer.sample(PAPER_BATCH, rng, device))
        _sync(device)
        return updates

    return work


def update_flops(agent: MultiTaskSAC, buffer: ReplayBuffer, device: torch.device,
                 batch_size: int = PAPER_BATCH) -> int:
    """Matrix-multiply FLOPs of one update (forward and backward), counted by torch."""
    batch = buffer.sample(batch_size, np.random.default_rng(123), device)
    with FlopCounterMode(display=False) as counter:
        agent.update(batch)
    return int(counter.get_total_flops())


def sb3_step(device: torch.device, buffer_size: int = BUFFER_ROWS) -> tuple[Work | None, int, str]:
    """Stable-Baselines3's SAC training step with the same networks (400x3 actor and twin
    critics, observation 39, action 4, batch 1280); ``(None, 0, why)`` when it is not installed."""
    try:
        import stable_baselines3
        from stable_baselines3 import SAC
        from stable_baselines3.common.logger import configure
    except ImportError:
        return None, 0, "stable-baselines3 is not installed (pip install -e '.[bench]')"
    import gymnasium as gym

    class _Spaces(gym.Env):
        # SB3 builds its networks from an environment's spaces; the training step never steps it.
        observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)

    model = SAC("MlpPolicy", _Spaces(), buffer_size=buffer_size, batch_size=PAPER_BATCH,
                learning_starts=0, policy_kwargs={"net_arch": [400, 400, 400]}, device=device,
                seed=0)
    model.set_logger(configure(None, []))
    rng = np.random.default_rng(0)
    rb = model.replay_buffer
    rb.observations[:] = rng.normal(size=rb.observations.shape).astype(np.float32)
    rb.next_observations[:] = rng.normal(size=rb.next_observations.shape).astype(np.float32)
    rb.actions[:] = rng.uniform(-1, 1, size=rb.actions.shape).astype(np.float32)
    rb.rewards[:] = rng.normal(size=rb.rewards.shape).astype(np.float32)
    rb.full = True

    def work(updates: int = 3) -> float:
        model.train(gradient_steps=updates, batch_size=PAPER_BATCH)
        _sync(device)
        return updates

    with FlopCounterMode(display=False) as counter:
        model.train(gradient_steps=1, batch_size=PAPER_BATCH)
    return work, int(counter.get_total_flops()), f"stable-baselines3 {stable_baselines3.__version__}"


@dataclass(frozen=True)
class Contender:
    """One row of the update table: its timed work, the matrix-multiply FLOPs it performs per
    update, and the FLOPs the update needs (the floor's numerator)."""

    name: str
    work: Work
    flops: int
    needed_flops: int


def eager_row(agent: MultiTaskSAC, label: str, buffer: ReplayBuffer, device: torch.device,
              updates: int, seed: int) -> Contender:
    """The agent's update run eagerly on batches drawn on the host: what the training loop runs
    on CPU."""
    flops = update_flops(agent, buffer, device)
    return Contender(f"{label} | eager", _update_work(agent, buffer, device, updates, seed),
                     flops, flops)


def captured_row(params: Params, experiment: str, label: str, task_names: tuple[str, ...],
                 device: torch.device, updates: int, flops: int) -> Contender:
    """What the training loop runs on CUDA: the static step replayed as a CUDA graph (its FLOPs
    are the eager update's; a captured graph cannot be counted)."""
    step = captured_update(params, experiment, task_names, device)
    return Contender(f"{label} | captured", _captured_work(step, device, updates), flops, flops)


SB3 = "Stable-Baselines3 SAC 400x3"


def sb3_row(device: torch.device, updates: int) -> tuple[Contender | None, str]:
    """Stable-Baselines3's training step (its own FLOPs are its floor), and a note: its version,
    or why it is not measured."""
    work, flops, note = sb3_step(device)
    if work is None:
        return None, note
    return Contender(SB3, lambda: work(updates), flops, flops), note


def measure_updates(params: Params, task_names: tuple[str, ...], device: torch.device, *,
                    rounds: int, updates: int,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Updates per second of every method's contenders (eager, and on CUDA captured) and SB3's
    step, interleaved with the GEMM rate that gives each its floor."""
    buffer = random_buffer(len(task_names))
    rows_of = method_rows(params)
    contenders: list[Contender] = []
    for label, exp in rows_of.values():
        eager = eager_row(paper_agent(params, exp, task_names, device), label, buffer, device,
                          updates, seed=len(contenders))
        contenders.append(eager)
        if device.type == "cuda":
            contenders.append(captured_row(params, exp, label, task_names, device, updates,
                                           eager.flops))
    sb3, sb3_note = sb3_row(device, updates)
    if sb3 is not None:
        contenders.append(sb3)
    works: dict[str, Work] = {GEMM: gemm_work(device)}
    works.update({c.name: c.work for c in contenders})
    rates = interleave(works, rounds, progress=progress)
    gemm_flops_per_s = rates.median(GEMM)
    rows = {}
    for c in contenders:
        ups = rates.median(c.name)
        # Time over floor = GEMM rate / (FLOPs needed x update rate), paired within each round.
        rows[c.name] = {"updates_per_s": ups, "ms_per_update": 1000.0 / ups,
                        "gflop_per_update": c.flops / 1e9,
                        "floor_ms": 1000.0 * c.needed_flops / gemm_flops_per_s,
                        "time_over_floor": rates.ratio(GEMM, c.name) / c.needed_flops}
    return {"rows": rows, "ratios": _ratios(rates, rows_of, device, sb3 is not None),
            "gemm_gflops": gemm_flops_per_s / 1e9,
            "gemm_gflops_best": rates.best(GEMM) / 1e9,
            "sb3": sb3_note if sb3 is not None else None,
            "sb3_missing": None if sb3 is not None else sb3_note}


def _ratios(rates: Rates, rows_of: dict[str, tuple[str, str]], device: torch.device,
            with_sb3: bool) -> dict[str, float]:
    """The paired ratios the table prints: each path over the one before it, every method over
    MT-SAC on the path the training loop takes here, MT-SAC over Stable-Baselines3."""
    best = "captured" if device.type == "cuda" else "eager"  # the training loop's path here
    ratios = {}
    for label, _ in rows_of.values():
        for a, b in (("captured", "eager"),):
            if f"{label} | {a}" in rates.samples and f"{label} | {b}" in rates.samples:
                ratios[f"{label}: {a} over {b}"] = rates.ratio(f"{label} | {a}", f"{label} | {b}")
    mtsac = f"{rows_of['mtsac'][0]} | {best}"
    ratios.update({f"{label}: time over MT-SAC's ({best})": rates.ratio(mtsac, f"{label} | {best}")
                   for label, _ in rows_of.values() if f"{label} | {best}" != mtsac})
    if with_sb3:
        for path in ("captured", "eager"):
            if f"{rows_of['mtsac'][0]} | {path}" in rates.samples:
                ratios[f"MT-SAC {path} over Stable-Baselines3"] = rates.ratio(
                    f"{rows_of['mtsac'][0]} | {path}", SB3)
    return ratios
