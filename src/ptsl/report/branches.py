"""The task branches measured: how large each PTSL layer's task-specific part is next to its
shared part, in a trained agent (reference 5.2, 5.5 and Q9).

A PTSL layer (:class:`~ptsl.core.agent.nets.pal.PALLayer`) computes
``act(S x + b  +  U((D x) W_t + c_t))``. For every such layer of the actor trunk and of both Q
networks this measures

* the weights: Frobenius norms of the shared Linear ``S`` (and its bias ``b``), of the down- and
  up-projections ``D`` and ``U`` where the layer has them (the network's shared ones are repeated
  on every layer that uses them), and of each task's ``W_t`` and ``c_t``, and how far each
  ``W_t`` moved from its initialisation (rebuilt from the run's seed: ``W_t`` starts standard
  normal, so its norm alone cannot tell a trained task layer from an untouched one);
* the outputs, on the agent's own evaluation observations (one deterministic episode per task
  of its benchmark, under its run's protocol): the Euclidean norm of the task branch's part of
  the pre-activation (``U y_low``, or ``y_low`` itself where the layer has no up-projection)
  and of the shared path's (``S x + b``), averaged over each task's observations, and their
  ratio.

A branch the zero-initialised projections keep dead (reference Q9) measures exactly 0.0.

    python -m ptsl.report.branches --out /tmp/branches                 # this project's runs
    python -m ptsl.report.branches --study mt10-cpu --out /tmp/branches
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..cli import ArgumentParser, run
from ..core.agent.builders import Shapes, build_agent
from ..core.agent.nets.pal import FeedForwardPAL, PALLayer, PALOutput
from ..core.agent.nets.task_encoder import PRETRAINED_TABLE_KEY
from ..core.agent.sac import MultiTaskSAC, one_cpu_thread
from ..core.config import RunConfig
from ..core.methods import method
from ..core.records import run_id
from ..ops.params import Params, run_config

#: The ``task`` of the rows that average a layer over its benchmark's tasks.
MEAN_TASK = "mean"
#: Columns of :func:`measure_observations`' frame and of ``branches.csv``, in order.
COLUMNS = ("run", "experiment", "seed", "method", "network", "layer", "task", "observations",
           "in_dim", "out_dim", "p_in", "p_out", "down", "up",
           "shared_weight_norm", "shared_bias_norm", "down_norm", "up_norm",
           "task_weight_norm", "task_weight_change", "task_bias_norm",
           "task_output_norm", "shared_output_norm", "ratio")
CSV_NAME = "branches.csv"
FIGURE_NAME = "branches.png"


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


def rollout(agent: MultiTaskSAC, cfg: RunConfig, task_cache: Path | None = None) -> Observations:
    """One episode per task of ``cfg``'s benchmark with ``agent``'s deterministic policy, in the
    environment the evaluate stage builds for the run (its goals, its protocol), stepped in this
    process; returns every observation the policy acted on."""
    from ..core.envs import load_tasks
    from ..core.evaluation import evaluate, evaluator

    tasks = load_tasks(cfg.experiment.benchmark, cfg.seed, task_cache)
    names = tuple(agent.meta.get("task_names", tasks.names))
    if names != tasks.names:
        raise ValueError(f"run {run_id(cfg.name, cfg.seed)}: the agent was trained on tasks "
                         f"{list(names)}, its benchmark {cfg.experiment.benchmark} has "
                         f"{list(tasks.names)}")
    recorder = _Recorder(agent)
    env = evaluator(tasks, cfg.env, cfg.seed, workers=1)
    try:
        evaluate(recorder, env, episodes=1)  # type: ignore[arg-type]  # it only calls act
    finally:
        env.close()
    return recorder.observations()


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


def measure_observations(agent: MultiTaskSAC, observations: Observations,
                         cfg: RunConfig) -> pd.DataFrame:
    """The measurement of every PTSL layer of ``agent`` (run ``cfg``) on ``observations``: one
    row per (network, layer, task) in benchmark order, then one row per (network, layer) with
    task :data:`MEAN_TASK` averaging the tasks (columns :data:`COLUMNS`).

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
    device = agent.device
    try:
        # One thread: the products' bits, hence the CSV's bytes, do not depend on the machine's
        # thread count.
        with torch.inference_mode(), one_cpu_thread(device):
            obs = torch.as_tensor(observations.obs, dtype=torch.float32, device=device)
            action = torch.as_tensor(observations.action, dtype=torch.float32, device=device)
            task = agent.task_index(torch.as_tensor(observations.task, dtype=torch.int64,
                                                    device=device), agent.num_tasks)
            encoding = agent.encode_task(task)
            agent.actor(obs, task, encoding)
            agent.critic(obs, action, task, encoding)
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
    return pd.DataFrame(rows, columns=list(COLUMNS))


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
    """Measure the PTSL layers of a loaded ``agent`` trained as ``cfg`` on its own evaluation
    observations (:func:`rollout`, then :func:`measure_observations`)."""
    return measure_observations(agent, rollout(agent, cfg, task_cache), cfg)


def ptsl_runs(params: Params, runs_dir: Path) -> list[tuple[str, int, Path]]:
    """``(experiment, seed, model.pt)`` of every trained row of ``params`` whose method has PTSL
    layers and whose run is found under ``runs_dir``, in params order."""
    found = []
    for exp in params.trained:
        if not method(params.experiments[exp].method).ptsl:
            continue
        for seed in params.seeds:
            model = Path(runs_dir) / run_id(exp, seed) / "model.pt"
            if model.is_file():
                found.append((exp, seed, model))
    return found


def measure_runs(params: Params, runs_dir: Path, task_cache: Path | None = None) -> pd.DataFrame:
    """:func:`measure_run` of every run :func:`ptsl_runs` finds, one frame (empty, with
    :data:`COLUMNS`, when there is none). A model trained under another config than ``params``
    resolves for it is refused (:class:`~ptsl.core.errors.CorruptFileError`)."""
    from ..core.persistence import load_agent

    frames = []
    for exp, seed, model in ptsl_runs(params, runs_dir):
        cfg = run_config(params, exp, seed)
        frames.append(measure_run(load_agent(model, expect=cfg), cfg, task_cache))
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(frames, ignore_index=True)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (experiment, network, layer), in the frame's order: the task-mean ratio's mean over
    seeds, its smallest and largest seed, the seeds, and the means over seeds of the task-mean
    ``W_t`` norm and of its change from initialisation (columns experiment, network, layer,
    ratio_mean, ratio_min, ratio_max, seeds, task_weight_norm, task_weight_change)."""
    mean = frame[frame["task"] == MEAN_TASK]
    keys = ["experiment", "network", "layer"]
    grouped = mean.groupby(keys, sort=False)
    out = grouped["ratio"].agg(ratio_mean="mean", ratio_min="min", ratio_max="max")
    out["seeds"] = grouped["seed"].nunique()
    out["task_weight_norm"] = grouped["task_weight_norm"].mean()
    out["task_weight_change"] = grouped["task_weight_change"].mean()
    return out.reset_index()


def render(frame: pd.DataFrame, labels: Mapping[str, str] | None = None) -> str:
    """:func:`summary` as a short text table, one line per row, network and layer."""
    table = summary(frame)
    labels = labels or {}
    lines = [f"{'row':<24} {'network':<12} {'layer':>5} {'ratio':>7} {'min-max over seeds':>19} "
             f"{'|W_t|':>7} {'|W_t-W_t0|':>10}"]
    for r in table.itertuples():
        spread = f"{r.ratio_min:.3g}-{r.ratio_max:.3g}"
        lines.append(f"{labels.get(r.experiment, r.experiment):<24} {r.network:<12} "
                     f"{r.layer:>5} {r.ratio_mean:>7.3g} {spread:>19} "
                     f"{r.task_weight_norm:>7.3g} {r.task_weight_change:>10.3g}")
    return "\n".join(lines) + "\n"


#: The figure's columns of panels: frame column, y label.
_PANELS = (("ratio", "|task branch| / |S x + b|"),
           ("task_weight_norm", "mean |W_t| (Frobenius)"),
           ("task_weight_change", "mean |W_t - W_t at init|"))


def plot_branches(frame: pd.DataFrame, path: Path,
                  labels: Mapping[str, str] | None = None) -> None:
    """Per network (a row of panels) and layer (x), one bar colour per experiment: the task
    branch's size against the shared path's (the ratio), the mean ``W_t`` norm and its change
    from initialisation, each the mean over tasks; bars the mean over seeds, each seed a point.
    Saved atomically as PNG.

    Non-finite ratios (a nonzero branch over an exactly zero shared path) are left out of the
    bars and points; the CSV keeps them.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from .figures import _colors, _save_png_atomic

    mean = frame[frame["task"] == MEAN_TASK]
    if mean.empty:
        raise ValueError("no PTSL layer to plot")
    experiments = list(dict.fromkeys(mean["experiment"]))
    networks = list(dict.fromkeys(mean["network"]))
    colors = dict(zip(experiments, _colors(len(experiments))))
    labels = labels or {}
    width = 0.8 / len(experiments)
    fig = Figure(figsize=(14, 2.5 * len(networks) + 1.2), dpi=110, layout="constrained")
    axes = fig.subplots(len(networks), len(_PANELS), squeeze=False)
    for row, net in enumerate(networks):
        sub = mean[mean["network"] == net]
        layers = sorted(sub["layer"].unique())
        for col, (column, ylabel) in enumerate(_PANELS):
            ax = axes[row, col]
            for k, exp in enumerate(experiments):
                offset = (k - (len(experiments) - 1) / 2) * width
                run = sub[sub["experiment"] == exp]
                for layer in layers:
                    values = run.loc[run["layer"] == layer, column].to_numpy(dtype=float)
                    values = values[np.isfinite(values)]
                    if values.size == 0:
                        continue
                    ax.bar(layer + offset, values.mean(), width, color=colors[exp], alpha=0.75)
                    # Each seed a point: the spread over seeds, not only the mean, is the finding.
                    ax.plot(np.full(values.size, layer + offset), values, ls="none", marker="o",
                            ms=3, mfc="black", mec="none")
            ax.set_xticks(layers, [str(x) for x in layers])
            ax.set_xlabel(f"{net}: PTSL layer (0 input, {layers[-1]} output)", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.set_ylim(bottom=0)
            ax.tick_params(labelsize=8)
            ax.grid(axis="y", alpha=0.3)
    # One legend for every panel, below them: inside a panel it would hide bars.
    fig.legend([Patch(color=colors[e], alpha=0.75) for e in experiments],
               [labels.get(e, e) for e in experiments], loc="outside lower center",
               ncols=min(len(experiments), 6), fontsize=8)
    fig.suptitle("PTSL task branches on evaluation observations (one deterministic episode per "
                 "task), means over tasks: bars the mean over seeds, points the seeds",
                 fontsize=10)
    _save_png_atomic(fig, path)


def write_branches(params: Params, runs_dir: Path, out_dir: Path,
                   task_cache: Path | None = None) -> dict[str, Path]:
    """Measure every PTSL run of ``params`` found under ``runs_dir`` and write
    ``out_dir/data/branches.csv`` and ``out_dir/figures/branches.png`` (``out_dir`` a reports
    folder); returns ``{"csv": ..., "figure": ...}``. Without any PTSL run it writes nothing
    and returns ``{}``. Everything is measured before the first file is written."""
    from ..core.files import write_atomic

    frame = measure_runs(params, runs_dir, task_cache)
    if frame.empty:
        return {}
    out_dir = Path(out_dir)
    labels = {name: exp.label or name for name, exp in params.experiments.items()}
    paths = {"csv": out_dir / "data" / CSV_NAME, "figure": out_dir / "figures" / FIGURE_NAME}
    plot_branches(frame, paths["figure"], labels)
    write_atomic(paths["csv"], frame.to_csv(index=False), "branch measurement")
    return paths


# ------------------------------------------------------------------------------ command line

#: Where a project or study keeps its training stages' outputs (ptsl.ops.paths.RUNS).
_RUNS = Path("data/runs")
#: What a study may be called (ptsl.ops.study.NAME): a folder name, never a path.
_STUDY_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def main(argv: list[str] | None = None) -> int:
    """``python -m ptsl.report.branches [--study NAME] --out DIR``: measure, print, write."""
    ap = ArgumentParser(prog="python -m ptsl.report.branches", description=__doc__)
    ap.add_argument("--study", help="a study (a folder under studies/); default: the project's "
                                    "own pipeline in the working directory")
    ap.add_argument("--out", required=True,
                    help="folder that receives data/branches.csv and figures/branches.png "
                         "(required: it never defaults into a stage's output folder)")
    args = ap.parse_args(argv)
    from ..core.errors import ConfigError, CorruptFileError
    from ..ops.params import load_params

    root = Path.cwd()
    if args.study is not None:
        folder = root / "studies" / args.study
        if not _STUDY_NAME.fullmatch(args.study) or not (folder / "params.yaml").is_file():
            known = ", ".join(sorted(p.parent.name for p in root.glob("studies/*/params.yaml")))
            known = known or "none"
            return _fail(f"--study: unknown study {args.study!r} (no studies/{args.study}/"
                         f"params.yaml in {root}); allowed: {known}")
        where = f"--study {args.study}"
    else:
        folder = root
        if not (folder / "params.yaml").is_file():
            return _fail(f"no params.yaml in {root}: run this from the project root, or name a "
                         "study with --study")
        where = "the project's pipeline (no --study)"
    try:
        params = load_params(folder / "params.yaml")
    except ConfigError as exc:
        return _fail(str(exc))
    runs_dir = folder.relative_to(root) / _RUNS  # relative: the messages name what was asked
    found = ptsl_runs(params, runs_dir)
    if not found:
        rows = [e for e in params.trained if method(params.experiments[e].method).ptsl]
        what = (f"PTSL rows {', '.join(rows)}, seeds {', '.join(map(str, params.seeds))}"
                if rows else "its params train no PTSL row")
        return _fail(f"{where}: no trained PTSL run under {runs_dir} ({what}); allowed: a "
                     "project or study whose PTSL runs are there (`dvc pull` their train stages)")
    # Goal lists are a pure function of the Meta-World version, benchmark and seed: a study reads
    # its project's cache. The rule of ptsl.ops.paths.task_cache_dir, restated: the report layer
    # imports nothing of ptsl.ops but the params file (tests/unit/test_import_layers.py).
    scratch = Path(os.environ.get("PTSL_SCRATCH") or root / ".scratch")
    task_cache = Path(os.environ.get("PTSL_TASK_CACHE") or scratch / "tasks")
    start = time.perf_counter()
    try:
        written = write_branches(params, runs_dir, Path(args.out), task_cache)
    except (ConfigError, CorruptFileError, FileNotFoundError) as exc:
        return _fail(str(exc))
    frame = pd.read_csv(written["csv"])
    labels = {name: exp.label or name for name, exp in params.experiments.items()}
    print(render(frame, labels), end="")
    print(f"measured {len(found)} run(s) in {time.perf_counter() - start:.1f} s; wrote "
          f"{written['csv']} and {written['figure']}")
    return 0


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    run(main)
