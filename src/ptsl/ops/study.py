"""Studies: named experiments beside the default pipeline (docs/studies.md).

A study is a folder ``studies/<name>/`` holding its own ``params.yaml`` (the project's schema),
its ``dvc.yaml``, ``dvc.lock`` and ``reports/``. Its stages are the project's stages, run with
the study folder as working directory: the same ``pipeline/`` scripts and ``src/`` code, the
study's own ``data/`` and ``reports/``, the project's shared inputs (task embeddings, published
numbers), MLflow store and DVC cache. Its ``dvc.yaml`` is the project's, with the paths of what
the project shares rewritten (:func:`study_dvc_yaml`), so a study never drifts from the pipeline:
``python -m ptsl.ops.study sync`` rewrites every study's from the project's, and a test checks
that the committed ones match.

``python -m ptsl.ops.study new NAME [--from STUDY]`` starts one from an existing study's params.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from ..cli import ArgumentParser, run
from ..core.errors import ConfigError
from ..core.files import write_atomic

STUDIES = "studies"
#: Paths of the project's dvc.yaml that a study shares with the project (code, pins and shared
#: inputs); every other path (data/runs, data/eval, reports/ ...) is the study's own.
SHARED_PREFIXES = ("pipeline/", "src/", "requirements/", "data/task_embeddings", "data/published")
HEADER = ("# Generated from the project's dvc.yaml by `python -m ptsl.ops.study sync`; do not edit\n"
          "# (a test checks it). The stages run in this folder: its params.yaml, data/ and\n"
          "# reports/, the project's code and shared inputs (docs/studies.md).\n")
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def study_of(path: Path) -> tuple[Path, str] | None:
    """``(project root, study name)`` when ``path`` is a study folder (``<root>/studies/<name>``
    of a checkout with a dvc.yaml at its root), else None."""
    path = path.resolve()
    if path.parent.name == STUDIES and (path.parent.parent / "dvc.yaml").is_file():
        return path.parent.parent, path.name
    return None


def shared_root(path: Path | None = None) -> Path:
    """The checkout whose shared inputs, MLflow store and DVC cache a stage run in ``path``
    (default: the working directory) uses: the study's project for a study folder, else
    ``path`` itself."""
    path = (path or Path.cwd()).resolve()
    found = study_of(path)
    return found[0] if found else path


def shared_path(path: Path, start: Path = Path(".")) -> Path:
    """``path`` (relative to the project root) as seen from ``start`` (default: the working
    directory): ``start / path`` in the project, the project's own from a study folder, reached
    by a relative path (``start/../../path``). Relative, because it shows in a study's reports
    (the published sources' files), which must read the same on every machine."""
    found = study_of(start)
    if not found:
        return start / path
    return start / os.path.relpath(found[0] / path, start.resolve())


def _rewrite_path(path: str, up: str) -> str:
    return up + path if path.startswith(SHARED_PREFIXES) else path


def _rewrite_entry(entry: Any, up: str) -> Any:
    """A deps/outs list entry: a path, or ``{path: options}``."""
    if isinstance(entry, str):
        return _rewrite_path(entry, up)
    return {_rewrite_path(k, up): v for k, v in entry.items()}


def study_dvc_yaml(project_dvc_yaml: str, depth: int = 2, versus: tuple[str, ...] = ()) -> str:
    """A study's dvc.yaml from the project's: each stage's command calls the project's script,
    and its deps on shared code and inputs point into the project (``depth`` folders up); its
    aggregate also depends on the runs file of each study in ``versus`` (the studies its
    tables set their rows beside: :func:`versus_studies`)."""
    up = "../" * depth
    spec = yaml.safe_load(project_dvc_yaml)
    for stage in spec["stages"].values():
        stage["cmd"] = re.sub(r"(?<![\w./])pipeline/", up + "pipeline/", stage["cmd"])
        if "deps" in stage:
            stage["deps"] = [_rewrite_entry(d, up) for d in stage["deps"]]
    spec["stages"]["aggregate"]["deps"] += [up + study_runs_file(name).as_posix()
                                            for name in versus]
    return HEADER + yaml.safe_dump(spec, sort_keys=False, width=100)


def versus_studies(folder: Path) -> tuple[str, ...]:
    """The studies the tables of ``folder``'s params.yaml set their rows beside
    (``tables.<t>.versus.study``), each once, in table order."""
    raw = yaml.safe_load((folder / "params.yaml").read_text()) or {}
    names = [(t.get("versus") or {}).get("study") for t in (raw.get("tables") or {}).values()
             if isinstance(t, dict)]
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str)))


def study_runs_file(name: str) -> Path:
    """Study ``name``'s data file of every run (its aggregate's ``reports/data/runs.csv``),
    relative to the project root; another study's table may set its rows beside them
    (``tables.<t>.versus``), and its aggregate then depends on the file."""
    return Path(STUDIES) / name / "reports" / "data" / "runs.csv"


def study_dirs(root: Path) -> list[Path]:
    """Every study folder of the checkout at ``root`` (those with a params.yaml), by name."""
    base = root / STUDIES
    return sorted(p for p in base.iterdir() if (p / "params.yaml").is_file()) \
        if base.is_dir() else []


def study_folder(root: Path, name: str) -> Path:
    """``root/studies/<name>``, a study's folder; FileNotFoundError naming the studies there
    where it has no params.yaml."""
    folder = root / STUDIES / name
    if not (folder / "params.yaml").is_file():
        known = ", ".join(p.name for p in study_dirs(root)) or "none"
        raise FileNotFoundError(f"no study {name!r} (no {STUDIES}/{name}/params.yaml in {root}); "
                                f"studies here: {known}")
    return folder


def sync(root: Path) -> list[Path]:
    """Rewrite every study's dvc.yaml from the project's, and give each the validate stage's
    constant stamp (in git, as the project's: the grid's workers clone the commit and every
    stage depends on it) and the branches_ptsl stages' folder (kept in git by its .gitignore,
    as the project's: the aggregate depends on it, also where no run has PTSL layers); returns
    the dvc.yaml files that changed."""
    from .paths import BRANCHES, VALIDATED, write_stamp

    project = (root / "dvc.yaml").read_text()
    changed = []
    for folder in study_dirs(root):
        text = study_dvc_yaml(project, versus=versus_studies(folder))
        target = folder / "dvc.yaml"
        if not target.is_file() or target.read_text() != text:
            write_atomic(target, text)
            changed.append(target)
        if not (folder / VALIDATED).is_file():
            write_stamp(folder / VALIDATED)
        if not (folder / BRANCHES).is_dir():
            write_atomic(folder / BRANCHES / ".gitignore", "")
    return changed


def new(root: Path, name: str, source: str) -> Path:
    """Start study ``name`` from study ``source``'s params.yaml; returns its folder."""
    if not NAME.fullmatch(name):
        raise ConfigError(f"study name {name!r} is not allowed; allowed: lower-case letters, "
                          "digits and - (it becomes a folder, a make target and MLflow names)")
    folder, origin = root / STUDIES / name, root / STUDIES / source
    if folder.exists():
        raise ConfigError(f"{folder}: already exists; pick another study name")
    if not (origin / "params.yaml").is_file():
        known = ", ".join(p.name for p in study_dirs(root)) or "none"
        raise ConfigError(f"--from: unknown study {source!r}; allowed: {known}")
    folder.mkdir(parents=True)
    shutil.copy2(origin / "params.yaml", folder / "params.yaml")
    sync(root)
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m ptsl.ops.study", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("sync", help="rewrite every study's dvc.yaml from the project's")
    add = sub.add_parser("new", help="start a study from another study's params.yaml")
    add.add_argument("name", help="the new study's name (a folder under studies/)")
    add.add_argument("--from", dest="source", default="mt10-cpu",
                     help="the study whose params.yaml it starts from (default: %(default)s)")
    args = ap.parse_args(argv)
    root = Path.cwd()
    if not (root / "dvc.yaml").is_file():
        print(f"error: no dvc.yaml in {root}: run this from the project root", file=sys.stderr)
        return 2
    try:
        if args.command == "sync":
            changed = sync(root)
            print("\n".join(f"rewrote {p}" for p in changed) or "every study's dvc.yaml is "
                  "up to date")
        else:
            folder = new(root, args.name, args.source)
            print(f"created {folder}: edit its params.yaml (rows, budget, seeds), then "
                  f"`make study-{args.name}`")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run(main)
