"""Rollout videos: one deterministic episode per task of a trained agent, rendered off-screen.

MuJoCo needs an off-screen OpenGL: EGL (GPU drivers) or OSMesa (software; Debian's
``libosmesa6``), chosen with ``MUJOCO_GL``. :func:`find_backend` checks which one works in a
child process (a missing GL library can abort the process that loads it) before any frame is
drawn here. Each task's episode becomes a small GIF plus a still of its last frame (for the
contact sheets of the report).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .config import EnvConfig
from .envs import MetaWorldTaskEnv, TaskSet, task_seed
from .records import TaskVideo, VideoIndex

BACKENDS = ("egl", "osmesa")
ENABLE_HINT = ("videos: no off-screen OpenGL for MuJoCo (tried MUJOCO_GL={tried}); install "
               "Debian's libosmesa6 (apt-get install libosmesa6) and set MUJOCO_GL=osmesa, or use "
               "a machine with EGL (NVIDIA driver, MUJOCO_GL=egl); continuing without videos")

_PROBE = """
import numpy as np
from metaworld.env_dict import ALL_V3_ENVIRONMENTS
env = ALL_V3_ENVIRONMENTS["reach-v3"](render_mode="rgb_array", camera_name="corner2",
                                      width=32, height=32)
frame = env.render()  # the initial state; no task or reset needed
assert frame.shape == (32, 32, 3) and frame.std() > 0, "blank frame"
"""


@dataclass(frozen=True)
class VideoSettings:
    """Frame size in pixels (square), every how many steps a frame is kept, GIF frame time."""

    size: int = 128
    every: int = 3
    frame_ms: int = 80


def backend_works(backend: str, timeout: float = 120.0) -> bool:
    """Whether MuJoCo renders a non-blank frame with ``MUJOCO_GL=backend`` (in a child process)."""
    env = {**os.environ, "MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend}
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def candidates() -> tuple[str, ...]:
    """``MUJOCO_GL`` when the user set it, else egl then osmesa."""
    chosen = os.environ.get("MUJOCO_GL")
    return (chosen,) if chosen else BACKENDS


def find_backend() -> str | None:
    """The first of :func:`candidates` that renders; None when none does."""
    for backend in candidates():
        if backend_works(backend):
            return backend
    return None


def no_backend_message() -> str:
    """One line: what was tried and how to enable videos."""
    return ENABLE_HINT.format(tried=", ".join(candidates()))


def use_backend(backend: str) -> None:
    """Select ``backend`` for this process; must run before the first frame is rendered."""
    os.environ["MUJOCO_GL"] = backend
    os.environ["PYOPENGL_PLATFORM"] = backend


def record_episode(agent, env: MetaWorldTaskEnv, task: int, episode_length: int,
                   every: int) -> tuple[list[np.ndarray], bool]:
    """Frames of one deterministic episode of task index ``task`` and whether it succeeded."""
    obs, _ = env.reset()
    frames, success = [env.render()], False
    for t in range(episode_length):
        action = agent.act(obs[None], np.array([task]), deterministic=True)[0]
        obs, _reward, _term, _trunc, info = env.step(action)
        success = success or info["success"] > 0
        if (t + 1) % every == 0 or t + 1 == episode_length:
            frames.append(env.render())
    return frames, success


def write_gif(frames: Sequence[np.ndarray], path: Path, frame_ms: int) -> None:
    """An animated GIF (one shared palette, looping); same frames give the same bytes."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    palette = images[len(images) // 2].quantize(colors=255, method=Image.Quantize.MEDIANCUT)
    quantized = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
    quantized[0].save(path, save_all=True, append_images=quantized[1:], duration=frame_ms,
                      loop=0, optimize=False)


def record_videos(agent, tasks: TaskSet, env_cfg: EnvConfig, seed: int, folder: Path,
                  settings: VideoSettings = VideoSettings()) -> VideoIndex:
    """Record every task of ``tasks`` into ``folder`` (``<task>.gif``, ``<task>.png`` and the
    :class:`VideoIndex`); build it aside (:func:`ptsl.core.files.folder_aside`) to swap it in."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # The GL backend is a property of the machine, so it stays out of this DVC output (the
    # evaluate stage logs it to MLflow); frames can still differ between renderers.
    videos = {}
    for i, name in enumerate(tasks.names):
        env = MetaWorldTaskEnv(name, tasks.goals[i], env_cfg, task_seed(seed, i), normalize=False,
                               render_size=settings.size)
        try:
            frames, success = record_episode(agent, env, i, env_cfg.episode_length,
                                             settings.every)
        finally:
            env.close()
        write_gif(frames, folder / f"{name}.gif", settings.frame_ms)
        Image.fromarray(frames[-1]).save(folder / f"{name}.png")
        videos[name] = TaskVideo(success=bool(success), frames=len(frames))
    index = VideoIndex(videos=True, size=settings.size, every=settings.every, tasks=videos)
    index.write(folder / VideoIndex.NAME)
    return index


def write_no_videos(folder: Path, reason: str) -> VideoIndex:
    """A video folder with nothing recorded: only the index, saying why."""
    index = VideoIndex(videos=False, reason=reason)
    index.write(Path(folder) / VideoIndex.NAME)
    return index
