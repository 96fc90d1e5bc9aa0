"""The task branches along training, read from a running study's resume checkpoints.

A training stage writes a resume checkpoint every ``train.checkpoint_every`` vector steps
(``<exp>-<seed>-<config key>-<step>.pt`` in its scratch folder) and deletes the one before. This
command watches that folder from outside the runs: each new checkpoint of a run with PTSL layers
is read (its checksum verified), the agent rebuilt from the checkpoint's own config and weights,
and its task branches measured as :mod:`ptsl.core.branches` measures a finished run's (on one
deterministic evaluation episode per task, the norms and ratios of every PTSL layer); a run's
start (step 0) is measured too, on the agent its config and seed build. The rows
go to ``<out>/branches_along.csv`` with a ``step`` column, and ``<out>/branches_along.png``
draws the task-mean ratio of every layer against the step, one line per seed.

It only reads: no run's bytes, checkpoints or timing of its random draws change (a checkpoint is
written through a temp file and renamed, so a read sees a whole one or none; one deleted while
being read is skipped). A (run, step) already in the CSV is not measured again, so the command
can stop and start with the study.

    python -m ptsl.tools.branches_along --resume-dir ../study-run/studies/mt10-b1280/.scratch/resume \\
        --out studies/mt10-b1280/along                # watch, every 60 s, until Ctrl-C
    python -m ptsl.tools.branches_along --resume-dir DIR --out DIR --once   # one pass
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..cli import ArgumentParser, real, run
from ..core.errors import ConfigError, CorruptFileError
from ..core.files import write_atomic

CSV_NAME = "branches_along.csv"
FIGURE_NAME = "branches_along.png"


def checkpoints(resume_dir: Path) -> list[tuple[str, int, int, Path]]:
    """``(experiment, seed, step, path)`` of every complete checkpoint in ``resume_dir`` (its
    checksum file beside it), by name."""
    from ..core.persistence import parse_checkpoint_name

    found = []
    for path in sorted(Path(resume_dir).glob("*.pt")):
        name = parse_checkpoint_name(path.name)
        if name and path.with_name(path.name + ".sha256").is_file():
            found.append((name.experiment, name.seed, name.step, path))
    return found


def measure_checkpoint(path: Path, task_cache: Path | None = None, start: bool = False
                       ) -> list[pd.DataFrame] | None:
    """The branch measurement of the agent in the resume checkpoint ``path`` (columns of
    :data:`ptsl.core.branch_records.NORM_COLUMNS` after ``step``), or None for a method without
    PTSL layers. With ``start``, first the measurement at step 0: the agent as training built it,
    before any update (the same config and seed build the same weights), with the checkpoint's
    own embedding table."""
    import torch

    from ..core.agent.builders import Shapes, build_agent
    from ..core.agent.nets.task_encoder import PRETRAINED_TABLE_KEY
    from ..core.benchmarks import ACTION_DIM, observation_dim
    from ..core.config import RunConfig
    from ..core.envs import load_tasks
    from ..core.methods import method
    from ..core.persistence import load
    from ..core.branches import measure_run

    state = load(path, "resume checkpoint")
    cfg = RunConfig.from_dict(state["config"])
    if not method(cfg.experiment.method).ptsl:
        return None
    model = state["agent"]["model"]
    names = load_tasks(cfg.experiment.benchmark, cfg.seed, task_cache).names
    table = model.get(f"task_encoder.{PRETRAINED_TABLE_KEY}")
    shapes = Shapes(observation_dim(cfg.env.observation), ACTION_DIM, len(names))
    # Built as training built it; the checkpoint's weights go in after the start is measured.
    agent = build_agent(cfg, shapes, tuple(names),
                        task_embeddings=None if table is None else table.cpu())
    frames = []
    for step in ([0] if start else []) + [int(state["step"])]:
        if step:
            agent.load_state_dict(model)
        with torch.inference_mode():
            frame = measure_run(agent, cfg, task_cache)
        frame.insert(0, "step", step)
        frames.append(frame)
    return frames


def read_rows(csv: Path) -> pd.DataFrame | None:
    """The rows measured so far (None: no file yet)."""
    if not csv.is_file():
        return None
    try:
        frame = pd.read_csv(csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CorruptFileError(csv, "branches-along table", f"not a CSV table ({exc})",
                               "delete it to measure again from the checkpoints at hand")
    if "step" not in frame.columns or "run" not in frame.columns:
        raise CorruptFileError(csv, "branches-along table", "no columns step and run",
                               "delete it to measure again from the checkpoints at hand")
    return frame


def measure_new(resume_dir: Path, out: Path, task_cache: Path | None = None,
                log=print, plain: set[str] | None = None) -> int:
    """One pass: measure every checkpoint in ``resume_dir`` whose (run, step) the CSV in ``out``
    lacks, append its rows (the file rewritten whole, through a temp file) and draw the figure
    again; returns how many agents were measured (a run's first checkpoint brings its start,
    step 0, too). ``plain`` holds the experiments found without PTSL layers (filled here): a
    watcher passes the same set to every pass, so their checkpoints, the replay buffer inside,
    are read once, not every pass."""
    from ..core.records import run_id

    csv = out / CSV_NAME
    rows = read_rows(csv)
    done = set() if rows is None else set(zip(rows["run"], rows["step"]))
    plain = set() if plain is None else plain
    frames = []
    for exp, seed, step, path in checkpoints(resume_dir):
        run = run_id(exp, seed)
        if (run, step) in done or exp in plain:
            continue
        try:
            measured_here = measure_checkpoint(path, task_cache, start=(run, 0) not in done)
        except (FileNotFoundError, CorruptFileError) as exc:
            # Deleted or replaced by the run's next checkpoint while being read: the next one
            # is measured instead.
            log(f"note: {path.name}: skipped ({exc})")
            continue
        if measured_here is None:
            plain.add(exp)
            continue
        frames += measured_here
        done |= {(run, int(f["step"].iloc[0])) for f in measured_here}
        log(f"measured {run} at step {step:,}" + (" and at its start" if len(measured_here) > 1
                                                   else ""))
    measured = len(frames)
    if not measured:
        return 0
    table = pd.concat(([] if rows is None else [rows]) + frames, ignore_index=True).sort_values(
        ["experiment", "seed", "step"], kind="stable")
    buf = io.StringIO()
    table.to_csv(buf, index=False)
    write_atomic(csv, buf.getvalue(), "branches-along table")
    plot_along(table, out / FIGURE_NAME)
    return measured


def plot_along(frame: pd.DataFrame, path: Path,
               labels: Mapping[str, str] | None = None) -> None:
    """Per network (a panel), the task-mean ratio of the task branch to the shared path of each
    PTSL layer (a colour) against the vector step, one line per run (seed); saved atomically as
    PNG."""
    from matplotlib.figure import Figure

    from ..core.branch_records import MEAN_TASK
    from ..report.figures import _colors, _save_png_atomic

    mean = frame[frame["task"] == MEAN_TASK]
    networks = list(dict.fromkeys(mean["network"]))
    layers = sorted(mean["layer"].unique())
    colors = dict(zip(layers, _colors(len(layers))))
    experiments = list(dict.fromkeys(mean["experiment"]))
    styles = dict(zip(experiments, ("-", "--", ":", "-.")))
    labels = labels or {}
    fig = Figure(figsize=(5 * len(networks), 3.6), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(networks), squeeze=False)[0]
    for ax, net in zip(axes, networks):
        sub = mean[mean["network"] == net]
        for (exp, seed, layer), run in sub.groupby(["experiment", "seed", "layer"], sort=True):
            run = run.sort_values("step")
            first = seed == sub.loc[sub["experiment"] == exp, "seed"].min()
            ax.plot(run["step"], run["ratio"], color=colors[layer], ls=styles.get(exp, "-"),
                    lw=1, marker="o", ms=2,
                    label=f"{labels.get(exp, exp)}, layer {layer}" if first else None)
        ax.set_title(net, fontsize=9)
        ax.set_xlabel("vector steps per task", fontsize=8)
        ax.set_ylabel("|task branch| / |S x + b|, mean over tasks", fontsize=8)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("PTSL task branches along training (resume checkpoints; one line per seed)",
                 fontsize=10)
    _save_png_atomic(fig, path)


def main() -> int:
    parser = ArgumentParser(prog="python -m ptsl.tools.branches_along", description=__doc__)
    parser.add_argument("--resume-dir", type=Path, required=True,
                        help="the study's resume checkpoints (<study>/.scratch/resume of the "
                             "checkout that trains it)")
    parser.add_argument("--out", type=Path, required=True,
                        help=f"folder of {CSV_NAME} and {FIGURE_NAME}")
    parser.add_argument("--every", type=real(0), default=60.0,
                        help="seconds between passes (default 60)")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args()
    if not args.resume_dir.is_dir():
        raise ConfigError(f"--resume-dir: {args.resume_dir} is not a folder; allowed: the "
                          "scratch/resume folder of a checkout that trains the study")
    read_rows(args.out / CSV_NAME)  # a broken table is refused before any work
    from ..ops.paths import TASK_CACHE

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    plain: set[str] = set()
    while True:
        measure_new(args.resume_dir, args.out, TASK_CACHE, log, plain)
        if args.once:
            return 0
        time.sleep(args.every)


if __name__ == "__main__":
    run(main)
