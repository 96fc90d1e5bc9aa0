"""The task branches of a trained PTSL agent: how large each PTSL layer's task-specific part is
next to its shared part (reference 5.2, 5.5 and Q9), and what the agent does without them.

A PTSL layer (:class:`~ptsl.core.agent.nets.pal.PALLayer`) computes
``act(S x + b  +  U((D x) W_t + c_t))``. For every such layer of the actor trunk and of both Q
networks :func:`measure_observations` measures

* the weights: Frobenius norms of the shared Linear ``S`` (and its bias ``b``), of the down- and
  up-projections ``D`` and ``U`` where the layer has them (the network's shared ones are repeated
  on every layer that uses them), and of each task's ``W_t`` and ``c_t``, and how far each
  ``W_t`` moved from its initialisation (rebuilt from the run's seed: ``W_t`` starts standard
  normal, so its norm alone cannot tell a trained task layer from an untouched one);
* the outputs, on the observations the deterministic policy acted on: the Euclidean norm of
  the task branch's part of the pre-activation (``U y_low``, or ``y_low`` itself where the layer
  has no up-projection) and of the shared path's (``S x + b``), averaged over each task's
  observations, and their ratio.

A branch the zero-initialised projections keep dead (reference Q9) measures exactly 0.0.

:func:`measure_branches` is what the ``branches_ptsl`` stage computes for one run: the evaluate
stage's episodes (its environment, seeds, goals and episode count) with the agent intact, whose
observations the norms are measured on, and the same episodes with every task branch zeroed
(:func:`zeroed_task_branches`: the shared path alone). The records' format is
:mod:`ptsl.core.branch_records`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .agent.builders import Shapes, build_agent
from .agent.nets.pal import FeedForwardPAL, PALLayer, PALOutput
from .agent.nets.task_encoder import PRETRAINED_TABLE_KEY
from .agent.sac import MultiTaskSAC, one_cpu_thread
from .branch_records import MEAN_TASK, NORM_COLUMNS, ZEROED_COLUMNS
from .config import RunConfig
from .envs import TaskSet, load_tasks
from .evaluation import EvalResult, evaluate, evaluator
from .records import run_id

#: Observations per forward pass of the measurement: a Meta-World+ evaluation (50 episodes of
#: 500 steps per task) would otherwise hold every layer's activations for all of them at once.
CHUNK = 8192


@dataclass(frozen=True)
class Observations:
    """What the networks were fed: observations (N, obs_dim), their task indices (N,) and the
    actions the deterministic policy chose for them (N, action_dim), the critic's input."""

    obs: np.ndarray
    task: np.ndarray
    action: np.ndarray


class _Recorder:
    """Acts as the agent does and keeps every observation it was asked about, so that the
    project's own evaluation loop (:func:`ptsl.core.evaluation.evaluate`) does the rollout."""

    def __init__(self, agent: MultiTaskSAC) -> None:
        self.agent = agent
        self.obs: list[np.ndarray] = []
        self.task: list[np.ndarray] = []
        self.action: list[np.ndarray] = []

    def act(self, obs: np.ndarray, task: np.ndarray | int,
            deterministic: bool = True) -> np.ndarray:
        action = self.agent.act(obs, task, deterministic)
        self.obs.append(np.array(np.atleast_2d(obs), dtype=np.float32))
        self.task.append(np.array(np.atleast_1d(task), dtype=np.int64))
        self.action.append(np.array(np.atleast_2d(action), dtype=np.float32))
        return action

    def observations(self) -> Observations:
        return Observations(np.concatenate(self.obs), np.concatenate(self.task),
                            np.concatenate(self.action))


def _check_tasks(agent: MultiTaskSAC, cfg: RunConfig, tasks: TaskSet) -> None:
    names = tuple(agent.meta.get("task_names", tasks.names))
    if names != tasks.names:
        raise ValueError(f"run {run_id(cfg.name, cfg.seed)}: the agent was trained on tasks "
                         f"{list(names)}, its benchmark {cfg.experiment.benchmark} has "
                         f"{list(tasks.names)}")


def run_episodes(agent: MultiTaskSAC, cfg: RunConfig, tasks: TaskSet, episodes: int,
                 workers: int = 1, record: bool = False
                 ) -> tuple[EvalResult, Observations | None]:
    """The evaluate stage's episodes of run ``cfg`` with ``agent``'s deterministic policy: its
    environment (:func:`~ptsl.core.evaluation.evaluator`, built afresh from the run's seed, so
    every call runs the same episodes), ``episodes`` per task; with ``record``, also every
    observation the policy acted on (under ``env.eval_ends_at_success`` that includes a finished
    task's last observation, on which the policy keeps acting while other tasks run)."""
    _check_tasks(agent, cfg, tasks)
    actor = _Recorder(agent) if record else agent
    env = evaluator(tasks, cfg.env, cfg.seed, workers)
    try:
        result = evaluate(actor, env, episodes)  # type: ignore[arg-type]  # it only calls act
    finally:
        env.close()
    return result, actor.observations() if isinstance(actor, _Recorder) else None


def rollout(agent: MultiTaskSAC, cfg: RunConfig, task_cache: Path | None = None) -> Observations:
    """One episode per task of ``cfg``'s benchmark with ``agent``'s deterministic policy, in the
    environment the evaluate stage builds for the run (its goals, its protocol), stepped in this
    process; returns every observation the policy acted on."""
    tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, task_cache)
    observations = run_episodes(agent, cfg, tasks, 1, record=True)[1]
    assert observations is not None
    return observations


def pal_layers(agent: MultiTaskSAC) -> list[PALLayer]:
    """Every PTSL layer of ``agent`` (actor, critic and target critic); empty for a method
    without PTSL layers."""
    return [m for m in agent.modules() if isinstance(m, PALLayer)]


@contextlib.contextmanager
def zeroed_task_branches(agent: MultiTaskSAC) -> Iterator[None]:
    """Inside the block every PTSL layer of ``agent`` has its task layers ``W_t`` and ``c_t``
    at zero, so its low-rank output ``y_low = z W_t + c_t`` is exactly 0, its task branch adds
    0 to ``S x + b`` and the next layer's residual gets 0 from it: each layer computes
    ``act(S x + b)``, the shared path alone, through the network's own forward. On leaving, the
    weights are put back bit for bit (the same tensors: nothing that holds them is rebuilt); the
    saved model file is never touched. Refused for an agent without PTSL layers."""
    layers = pal_layers(agent)
    if not layers:
        raise ValueError("the agent has no PTSL layer: there is no task branch to zero")
    kept = [(layer.task_weight.detach().clone(), layer.task_bias.detach().clone())
            for layer in layers]
    try:
        with torch.no_grad():
            for layer in layers:
                layer.task_weight.zero_()
                layer.task_bias.zero_()
        yield
    finally:
        with torch.no_grad():
            for layer, (weight, bias) in zip(layers, kept):
                layer.task_weight.copy_(weight)
                layer.task_bias.copy_(bias)


def ptsl_networks(agent: MultiTaskSAC) -> list[tuple[str, FeedForwardPAL]]:
    """Every PTSL network the agent acts and learns with, by module path: ``actor.trunk``,
    ``critic.q1``, ``critic.q2`` (the target critic, a Polyak average of the critic, is left
    out). Empty for a method without PTSL layers."""
    found = []
    for root_name, root in (("actor", agent.actor), ("critic", agent.critic)):
        for name, module in root.named_modules():
            if isinstance(module, FeedForwardPAL):
                found.append((f"{root_name}.{name}", module))
    return found


class _Probe:
    """Forward hook of one PAL layer: sums, per task, the norms of its task branch's and its
    shared path's parts of the pre-activation over every row it sees."""

    def __init__(self, num_tasks: int) -> None:
        self.branch = np.zeros(num_tasks)
        self.shared = np.zeros(num_tasks)
        self.count = np.zeros(num_tasks, dtype=np.int64)

    def __call__(self, layer: PALLayer, args: tuple, output: PALOutput) -> None:
        x, task = args[0], args[1]
        shared = F.linear(x, layer.shared.weight, layer.shared.bias)
        branch = output.y_low if layer.up is None else F.linear(output.y_low, layer.up.weight)
        ids = task.ids.cpu().numpy()
        n = len(self.count)
        # bincount sums in row order: the same bits on every run and thread count.
        self.branch += np.bincount(ids, _row_norms(branch), minlength=n)
        self.shared += np.bincount(ids, _row_norms(shared), minlength=n)
        self.count += np.bincount(ids, minlength=n)


def _row_norms(t: torch.Tensor) -> np.ndarray:
    return torch.linalg.vector_norm(t.double(), dim=1).cpu().numpy()


def ratio(branch: float, shared: float) -> float:
    """``branch / shared``, defined everywhere: 0.0 for a branch that is exactly zero (a dead
    branch is 0 whatever the shared path does), inf for a nonzero branch over an exactly zero
    shared path, NaN for a branch without observations (its mean norm is NaN)."""
    if branch == 0.0:
        return 0.0
    if shared == 0.0:
        return math.inf
    return branch / shared


def _norm(t: torch.Tensor | None) -> float:
    return math.nan if t is None else float(torch.linalg.vector_norm(t.detach().double()))


def _projection(layer: PALLayer, net: FeedForwardPAL, which: str) -> str:
    own = getattr(layer, which)
    if own is None:
        return "none"
    return "shared" if own is getattr(net, which) else "own"


def initial_task_weights(agent: MultiTaskSAC, cfg: RunConfig) -> dict[str, torch.Tensor]:
    """The ``W_t`` tensors (T, P_in, P_out) every PTSL layer of ``agent`` started from, by
    parameter name (``actor.trunk.layers.0.task_weight``): the run's agent built again from its
    seed, as training built it (the same seed gives the same weights). Its task encoder reads
    the agent's own embedding table, so no embeddings file is needed."""
    meta = agent.meta
    table = agent.state_dict().get(f"task_encoder.{PRETRAINED_TABLE_KEY}")
    fresh = build_agent(cfg, Shapes(meta["obs_dim"], meta["action_dim"], agent.num_tasks),
                        tuple(meta["task_names"]),
                        task_embeddings=None if table is None else table.cpu())
    trained = dict(agent.named_parameters())
    initial = {}
    for name, p in fresh.named_parameters():
        if name.endswith("task_weight"):
            if name not in trained or trained[name].shape != p.shape:
                raise ValueError(f"run {run_id(cfg.name, cfg.seed)}: its config builds "
                                 f"{name} as {tuple(p.shape)}, the agent has another; measure "
                                 "an agent with the config it was trained under")
            initial[name] = p.detach()
    return initial


def _forward(agent: MultiTaskSAC, observations: Observations) -> None:
    """The actor on every observation and the critic on it with the policy's action, in chunks
    of :data:`CHUNK` rows (each chunk's hooks add to the sums in row order)."""
    device = agent.device
    for start in range(0, len(observations.obs), CHUNK):
        rows = slice(start, start + CHUNK)
        obs = torch.as_tensor(observations.obs[rows], dtype=torch.float32, device=device)
        action = torch.as_tensor(observations.action[rows], dtype=torch.float32, device=device)
        task = agent.task_index(torch.as_tensor(observations.task[rows], dtype=torch.int64,
                                                device=device), agent.num_tasks)
        encoding = agent.encode_task(task)
        agent.actor(obs, task, encoding)
        agent.critic(obs, action, task, encoding)


def measure_observations(agent: MultiTaskSAC, observations: Observations,
                         cfg: RunConfig) -> pd.DataFrame:
    """The measurement of every PTSL layer of ``agent`` (run ``cfg``) on ``observations``: one
    row per (network, layer, task) in benchmark order, then one row per (network, layer) with
    task :data:`~ptsl.core.branch_records.MEAN_TASK` averaging the tasks (columns
    :data:`~ptsl.core.branch_records.NORM_COLUMNS`).

    The actor sees each observation, the Q networks each observation with the action the policy
    chose for it. Output norms are means over a task's rows; ``ratio`` is the ratio of the
    row's two mean norms (a ratio of means: a Q layer's 1-wide shared path can pass near zero on
    single rows, which would swamp a mean of per-row ratios). The mean row averages the
    per-task values with every task weighted equally, its ratio again that of its mean norms; a
    layer's ``down_norm``/``up_norm`` is empty where it has no such projection (``down``/``up``
    say ``none``, ``own`` or ``shared`` across the network's layers); ``task_weight_change``
    is ``|W_t - W_t at initialisation|`` (:func:`initial_task_weights`). Tasks without
    observations have empty output columns. The networks are not changed: forward hooks read
    each layer's input and output.
    """
    names = list(agent.meta["task_names"])
    nets = ptsl_networks(agent)
    initial = initial_task_weights(agent, cfg)
    probes = {(net_name, i): _Probe(agent.num_tasks)
              for net_name, net in nets for i in range(len(net.layers))}
    hooks = [layer.register_forward_hook(probes[(net_name, i)])
             for net_name, net in nets for i, layer in enumerate(net.layers)]
    try:
        # One thread: the products' bits, hence the CSV's bytes, do not depend on the machine's
        # thread count.
        with torch.inference_mode(), one_cpu_thread(agent.device):
            _forward(agent, observations)
    finally:
        for hook in hooks:
            hook.remove()
    run = {"run": run_id(cfg.name, cfg.seed), "experiment": cfg.name, "seed": cfg.seed,
           "method": cfg.experiment.method}
    rows = []
    for net_name, net in nets:
        for i, layer in enumerate(net.layers):
            start = initial[f"{net_name}.layers.{i}.task_weight"]
            rows += _layer_rows(run, net_name, net, i, layer, start, probes[(net_name, i)],
                                names)
    return pd.DataFrame(rows, columns=list(NORM_COLUMNS))


def _layer_rows(run: dict, net_name: str, net: FeedForwardPAL, index: int, layer: PALLayer,
                start: torch.Tensor, probe: _Probe, names: Sequence) -> list[dict]:
    fixed = {**run, "network": net_name, "layer": index,
             "in_dim": layer.shared.in_features, "out_dim": layer.shared.out_features,
             "p_in": layer.p_in, "p_out": layer.p_out,
             "down": _projection(layer, net, "down"), "up": _projection(layer, net, "up"),
             "shared_weight_norm": _norm(layer.shared.weight),
             "shared_bias_norm": _norm(layer.shared.bias),
             "down_norm": _norm(None if layer.down is None else layer.down.weight),
             "up_norm": _norm(None if layer.up is None else layer.up.weight)}
    weight = torch.linalg.vector_norm(layer.task_weight.detach().double(), dim=(1, 2))
    change = torch.linalg.vector_norm((layer.task_weight.detach() - start.to(
        layer.task_weight.device)).double(), dim=(1, 2))
    bias = torch.linalg.vector_norm(layer.task_bias.detach().double(), dim=1)
    seen = probe.count > 0
    # Means over a task's rows; a task the observations lack has none (NaN, not a fake 0).
    branch = np.divide(probe.branch, probe.count, out=np.full(len(seen), np.nan), where=seen)
    shared = np.divide(probe.shared, probe.count, out=np.full(len(seen), np.nan), where=seen)
    rows = [{**fixed, "task": str(name), "observations": int(probe.count[t]),
             "task_weight_norm": float(weight[t]), "task_weight_change": float(change[t]),
             "task_bias_norm": float(bias[t]),
             "task_output_norm": float(branch[t]), "shared_output_norm": float(shared[t]),
             "ratio": ratio(float(branch[t]), float(shared[t]))}
            for t, name in enumerate(names)]
    mean_branch = float(branch[seen].mean()) if seen.any() else math.nan
    mean_shared = float(shared[seen].mean()) if seen.any() else math.nan
    rows.append({**fixed, "task": MEAN_TASK, "observations": int(probe.count.sum()),
                 "task_weight_norm": float(weight.mean()),
                 "task_weight_change": float(change.mean()), "task_bias_norm": float(bias.mean()),
                 "task_output_norm": mean_branch, "shared_output_norm": mean_shared,
                 "ratio": ratio(mean_branch, mean_shared)})
    return rows


def measure_run(agent: MultiTaskSAC, cfg: RunConfig,
                task_cache: Path | None = None) -> pd.DataFrame:
    """Measure the PTSL layers of a loaded ``agent`` trained as ``cfg`` on one deterministic
    evaluation episode per task (:func:`rollout`, then :func:`measure_observations`)."""
    return measure_observations(agent, rollout(agent, cfg, task_cache), cfg)


def measure_branches(agent: MultiTaskSAC, cfg: RunConfig, tasks: TaskSet, episodes: int,
                     workers: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What the ``branches_ptsl`` stage records for run ``cfg``: ``(norms, zeroed)`` in the
    columns of :mod:`ptsl.core.branch_records`. The evaluate stage's ``episodes`` per task run
    twice, on the same environment, seeds and goals: with the agent intact (its observations
    are what the norms are measured on, :func:`measure_observations`) and with every task
    branch zeroed (:func:`zeroed_task_branches`); ``zeroed`` holds each task's success and raw
    return both ways."""
    intact, observations = run_episodes(agent, cfg, tasks, episodes, workers, record=True)
    assert observations is not None
    with zeroed_task_branches(agent):
        zeroed, _ = run_episodes(agent, cfg, tasks, episodes, workers)
    norms = measure_observations(agent, observations, cfg)
    run = {"run": run_id(cfg.name, cfg.seed), "experiment": cfg.name, "seed": cfg.seed,
           "method": cfg.experiment.method}
    rows = [{**run, "task": name, "episodes": episodes,
             "intact_success": float(intact.success[t]), "zeroed_success": float(zeroed.success[t]),
             "intact_return": float(intact.returns[t]), "zeroed_return": float(zeroed.returns[t])}
            for t, name in enumerate(tasks.names)]
    return norms, pd.DataFrame(rows, columns=list(ZEROED_COLUMNS))
