"""Environment check: MuJoCo loads, the benchmarks' tasks build and step, versions recorded.

Two levels: :func:`check_machine` (seconds; every training and evaluation stage calls it, so every
machine of a grid is checked) and :func:`run_checks` (the ``check_env`` stage: builds every
benchmark in use). Every failure is raised as :class:`EnvCheckError` whose message says what to fix.
"""

from __future__ import annotations

import platform
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .config import EnvConfig

PACKAGES = ("torch", "mujoco", "metaworld", "gymnasium", "numpy", "dvc", "mlflow", "pandas")
# Packages whose version changes a training result. Training stages depend on requirements.txt
# (the pins, the same on every machine) rather than on a record of one machine, so each machine
# must prove that it runs the pinned versions. A local build tag (torch 2.13.0+cu128) is the
# machine's business and is ignored.
RESULT_PACKAGES = ("torch", "mujoco", "metaworld", "gymnasium", "numpy")


class EnvCheckError(RuntimeError):
    """The environment cannot run the pipeline; the message says what to fix."""


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError as exc:
            raise EnvCheckError(f"package {name} is not installed; run `make install`") from exc
    return out


def torch_device() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"cuda_available": torch.cuda.is_available()}
    info["device"] = "cuda" if info["cuda_available"] else "cpu"
    if info["cuda_available"]:
        info["cuda_device"] = torch.cuda.get_device_name(0)
    return info


def check_mujoco() -> None:
    try:
        import mujoco

        model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><geom size='1'/>"
                                               "</body></worldbody></mujoco>")
        mujoco.mj_step(model, mujoco.MjData(model))
    except Exception as exc:  # noqa: BLE001 - any failure here means the same fix
        raise EnvCheckError(f"MuJoCo failed to load ({type(exc).__name__}: {exc}); reinstall it "
                            "with `make install` (mujoco==3.3.0 wheels need glibc >= 2.27)") from exc


def pinned_versions(requirements: Path) -> dict[str, str]:
    """``name==version`` pins of ``requirements`` (a pip requirements file), by lower-case name."""
    if not Path(requirements).is_file():
        raise EnvCheckError(f"{requirements} not found: the pinned versions every machine must "
                            "run are read from there; run stages from the project root")
    pins: dict[str, str] = {}
    for line in Path(requirements).read_text().splitlines():
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def check_machine(requirements: Path = Path("requirements.txt")) -> dict[str, Any]:
    """The fast check every training and evaluation stage runs first, on whichever machine runs it.

    Packages are installed at the versions ``requirements`` pins for :data:`RESULT_PACKAGES`, and
    MuJoCo loads a model and steps it. Returns the machine's record (host, versions, torch device)
    for MLflow tags; raises :class:`EnvCheckError` with one line otherwise.
    """
    versions = package_versions()
    pins = pinned_versions(requirements)
    for name in RESULT_PACKAGES:
        installed, pinned = versions[name].split("+")[0], pins.get(name)
        if pinned is not None and installed != pinned:
            raise EnvCheckError(f"{name} {versions[name]} is installed but {requirements} pins "
                                f"{pinned}; run `make install` on this machine")
    check_mujoco()
    return {"host": platform.node(), "versions": versions, "torch": torch_device()}


def check_benchmark(benchmark: str, env_cfg: EnvConfig, seed: int, task_cache: Path | None,
                    steps: int = 3) -> dict[str, Any]:
    """Build every task of ``benchmark``, reset it and take ``steps`` random steps."""
    from .envs import MultiTaskVecEnv, load_tasks

    try:
        tasks = load_tasks(benchmark, seed, task_cache)
        env = MultiTaskVecEnv(tasks, env_cfg, seed, vector="sync")
    except Exception as exc:  # noqa: BLE001
        raise EnvCheckError(f"Meta-World benchmark {benchmark} did not build ({type(exc).__name__}:"
                            f" {exc}); check the metaworld and mujoco versions (`make install`)") from exc
    try:
        obs = env.reset()
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            res = env.step(env.sample_actions(rng))
            if not np.all(np.isfinite(res.obs)):
                raise EnvCheckError(f"{benchmark}: non-finite observation after a random step")
    finally:
        env.close()
    return {"num_tasks": tasks.num_tasks, "obs_dim": int(obs.shape[1]),
            "action_dim": env.action_dim, "tasks": list(tasks.names)}


def run_checks(benchmarks: Iterable[str], env_cfg: EnvConfig, task_cache: Path | None,
               seed: int = 0) -> dict[str, Any]:
    """All checks; returns the record written to ``reports/``."""
    report: dict[str, Any] = {"versions": package_versions(), "torch": torch_device()}
    check_mujoco()
    report["benchmarks"] = {b: check_benchmark(b, env_cfg, seed, task_cache)
                            for b in sorted(set(benchmarks))}
    return report
