"""Rollout videos in the report: the GIFs the evaluate stages recorded, copied under
``reports/videos/``, and one contact sheet per table (a frame grid per row)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..core.records import TaskVideo, VideoIndex, run_id
from ..ops.params import Params
from .figures import plot_contact_sheet


@dataclass(frozen=True)
class Rollouts:
    """Recorded rollout videos of one run (``data/videos/<exp>-<seed>/``)."""

    folder: Path
    tasks: Mapping[str, TaskVideo]

    def tiles(self) -> list[tuple[str, np.ndarray, bool]]:
        """(task, last frame, success) per task, for a contact sheet."""
        from PIL import Image

        return [(name, np.asarray(Image.open(self.folder / f"{name}.png").convert("RGB")),
                 info.success) for name, info in self.tasks.items()]


def collect_videos(params: Params, videos_dir: Path) -> dict[str, Rollouts]:
    """Runs (``<exp>-<seed>``) with recorded videos; a run's missing index is an error, and so
    is an index that is not valid or names a file that is not there (CorruptFileError)."""
    out = {}
    for exp in params.trained:
        for seed in params.seeds:
            name = run_id(exp, seed)
            index = VideoIndex.read_folder(videos_dir / name)
            if index.videos:
                out[name] = Rollouts(folder=videos_dir / name, tasks=index.tasks)
    return out


def write_videos(params: Params, videos: Mapping[str, Rollouts], out_dir: Path,
                 files: dict[str, tuple[bytes | str, str]]) -> dict[str, str]:
    """Copy the GIFs to ``out_dir/videos/<exp>-<seed>/`` and add one contact sheet per table
    (a frame grid per table row, its first seed) to ``files`` (path under the reports folder:
    contents, role), as :func:`ptsl.report.tables.write_reports` writes every report. Returns
    each sheet's path under the reports folder by table."""
    target = out_dir / "videos"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if not videos:
        (target / "README.md").write_text(
            "No rollout videos: set `evaluate.videos: true` in params.yaml (needs off-screen "
            "MuJoCo rendering, see the README) and run `dvc repro`.\n")
        return {}
    for name, rollouts in videos.items():
        (target / name).mkdir()
        for task in rollouts.tasks:
            shutil.copy2(rollouts.folder / f"{task}.gif", target / name / f"{task}.gif")
    sheets = {}
    for tname, table in params.tables.items():
        seed = params.table_seeds(table)[0]
        names = [(n, run_id(n, seed)) for n in table.rows]
        if not all(run in videos for _, run in names):
            continue
        rows = [(f"{params.experiments[n].label or n} ({run})", videos[run].tiles())
                for n, run in names]
        path = f"figures/{tname}_rollouts.png"
        files[path] = (plot_contact_sheet(
            rows, f"{table.title}: last frame of one deterministic episode per task, seed "
                  f"{seed} (✓ success)"), "figure")
        sheets[tname] = path
    return sheets
