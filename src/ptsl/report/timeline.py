"""A study's timeline (PNG): each training stage's attempts as bars over the study's wall time,
from its time record (:mod:`ptsl.ops.study_time`): where runs ran side by side, where one was
killed and resumed, where the machine stood idle."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .figures import _colors, _save_png_atomic

#: An attempt that did not finish (killed, failed): drawn hatched and lighter in its colour.
UNFINISHED_HATCH = "////"


def _experiment(stage: str) -> str:
    """``mt10_care`` for ``train@mt10_care-3``."""
    return stage.split("@", 1)[1].rsplit("-", 1)[0]


def plot_timeline(record: Mapping[str, Any], path: Path) -> None:
    """One row per training stage (in order of first start), one bar per attempt from its start
    to its end in hours since the study's first start, coloured by experiment; attempts still
    running have no end and are left out."""
    stages = [s for s in record["train"] if any(r["end_ms"] for r in s["runs"])]
    stages.sort(key=lambda s: min(r["start_ms"] for r in s["runs"]))
    t0 = min((r["start_ms"] for s in stages for r in s["runs"]), default=0)
    experiments = list(dict.fromkeys(_experiment(s["stage"]) for s in stages))
    color = dict(zip(experiments, _colors(len(experiments))))
    fig = Figure(figsize=(9, 0.28 * len(stages) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    for row, stage in enumerate(stages):
        exp = _experiment(stage["stage"])
        for run in stage["runs"]:
            if not run["end_ms"]:
                continue
            start = (run["start_ms"] - t0) / 3.6e6
            width = (run["end_ms"] - run["start_ms"]) / 3.6e6
            done = run["status"] == "FINISHED"
            ax.barh(row, width, left=start, height=0.7, color=color[exp],
                    alpha=1.0 if done else 0.45, hatch=None if done else UNFINISHED_HATCH,
                    edgecolor="black", linewidth=0.4)
    ax.set_yticks(range(len(stages)), [s["stage"].split("@", 1)[1] for s in stages], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("hours since the study's first start")
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=color[e], label=e) for e in experiments]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch=UNFINISHED_HATCH,
                         label="killed (resumed or restarted later)"))
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=len(handles))
    hours = record["training_seconds"] / 3600
    ax.set_title(f"Study {record['study']}: {record['training_runs_finished']} training runs "
                 f"finished, {hours:.1f} h of training, at most "
                 f"{record['most_training_runs_at_once']} at once", fontsize=9)
    _save_png_atomic(fig, path)
