"""The machine's check: the packages that compute the results run at the pinned versions and
MuJoCo loads (every training and evaluation stage, so every machine of a grid is checked), and
what the ``check_env`` stage records of it.

Every failure is an :class:`~ptsl.core.errors.EnvCheckError` whose message says what to fix.
"""

from __future__ import annotations

import platform
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import EnvCheckError
from .paths import COMPUTE_PINS
from .study import shared_path

#: Packages whose versions the check_env stage records (the machine, for MLflow).
PACKAGES = ("torch", "mujoco", "metaworld", "gymnasium", "numpy", "dvc", "mlflow", "pandas")


def package_versions(names: Sequence[str] = PACKAGES,
                     missing: str | None = None) -> dict[str, str]:
    """Python's version and the installed version of each of ``names``. A package that is not
    installed is refused (:class:`~ptsl.core.errors.EnvCheckError`), or, where ``missing`` is
    given (a record that lists what it found, as the benchmark's), stands with that text."""
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError as exc:
            if missing is None:
                raise EnvCheckError(f"package {name} is not installed; run `make install`") from exc
            out[name] = missing
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


def check_machine(requirements: Path | None = None) -> dict[str, Any]:
    """The fast check every training and evaluation stage runs first, on whichever machine runs it.

    Every package ``requirements`` pins (the ones that compute the results: the stages depend on
    that file, never on a record of one machine) is installed at its pinned version, a local
    build tag (``+cu128``) aside, and MuJoCo loads a model and steps it. Returns the machine's
    record (host, versions, torch device) for MLflow tags.
    """
    versions = package_versions()
    requirements = requirements or shared_path(COMPUTE_PINS)  # a study's: the project's pins
    for name, pinned in pinned_versions(requirements).items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            raise EnvCheckError(f"package {name} is not installed but {requirements} pins "
                                f"{pinned}; run `make install` on this machine") from None
        if installed.split("+")[0] != pinned:
            raise EnvCheckError(f"{name} {installed} is installed but {requirements} pins "
                                f"{pinned}; run `make install` on this machine")
    check_mujoco()
    return {"host": platform.node(), "versions": versions, "torch": torch_device()}
