"""Record stages against the current code when their outputs are known unchanged.

After a change of the code a stage depends on (``src/ptsl/core``, a stage script) that keeps
every byte the stage writes (shown with ``python -m ptsl.tools.same_bytes``, docs/studies.md),
``dvc commit`` records the stage's new dependency hashes, but only where its outputs are in the
workspace. A pipeline whose outputs are elsewhere (another machine's cache, a remote not at hand)
is recorded here instead: each named stage's dependencies are hashed as DVC hashes them and its
``dvc.lock`` entry is rewritten with them, its outputs' hashes kept as they are.

    python -m ptsl.ops.relock --all                       # every train/evaluate/branches stage
    python -m ptsl.ops.relock --study mt10-cpu --all      # a study's
    python -m ptsl.ops.relock 'train@mt10_care-1' ...     # some

A stage whose params differ from its entry's is refused (its outputs would change), as is one
with no entry (nothing to keep). A dependency that is another stage's output and is not in the
workspace keeps its entry's hash (the output's, which that stage's entry keeps too). The command
prints every dependency whose hash it changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .study import STUDIES, study_dirs

#: The stage groups ``--all`` records: what costs a training run (or a trained agent's
#: episodes, which need its model at hand) to redo.
RELOCKED = ("train", "train_ptsl", "evaluate", "evaluate_ptsl", "branches_ptsl")


def _entry_deps(stage: Any) -> dict[str, str | None]:
    return {str(d.def_path): (d.hash_info.value if d.hash_info else None)
            for d in stage.deps if not getattr(d, "IS_PARAMS", False) and
            type(d).__name__ != "ParamsDependency"}


def _params(stage: Any) -> dict[str, Any]:
    return {str(d.def_path): d.hash_info.value for d in stage.deps
            if type(d).__name__ == "ParamsDependency"}


def relock(folder: Path, names: list[str] | None) -> list[tuple[str, list[str]]]:
    """Rewrite the dependency hashes of ``names`` (None: every stage of :data:`RELOCKED`
    with a lock entry; the others are cheap to run again, and the aggregate reads every run) in
    ``folder``'s dvc.lock; returns, per stage, the dependencies whose hash changed."""
    from dvc.repo import Repo

    out: list[tuple[str, list[str]]] = []
    with Repo(str(folder)) as repo:
        dvcfile = folder / "dvc.yaml"
        stages = {s.name: s for s in repo.stage.collect(str(dvcfile))}
        outs = {str(o.def_path) for s in stages.values() for o in s.outs}
        chosen = ([n for n in stages if n.split("@")[0] in RELOCKED] if names is None
                  else names)
        unknown = [n for n in chosen if n not in stages]
        if unknown:
            raise ConfigError(f"stage {unknown[0]!r} is not in {dvcfile}; allowed: the names "
                              "`dvc stage list` prints")
        for name in chosen:
            stage = stages[name]
            if stage.is_callback or stage.always_changed:
                continue
            if any(o.hash_info is None or not o.hash_info.value for o in stage.outs):
                if names is None:
                    continue
                raise ConfigError(f"{name}: no dvc.lock entry with its outputs' hashes; "
                                  "allowed: stages that ran (`dvc repro` them instead)")
            before, params = _entry_deps(stage), _params(stage)
            for dep in stage.deps:
                if dep.exists:
                    dep.save()
                elif not (dep.hash_info and dep.hash_info.value and str(dep.def_path) in outs):
                    raise ConfigError(f"{name}: dependency {dep.def_path} is missing and no "
                                      "stage of this pipeline records it as an output")
                # else: another stage's output not in the workspace: its entry's hash stays,
                # which that stage's own entry (kept by this command) still names.
            if _params(stage) != params:
                raise ConfigError(f"{name}: its params differ from its dvc.lock entry; its "
                                  "outputs would change, so `dvc repro` it instead")
            changed = [p for p, h in _entry_deps(stage).items() if before.get(p) != h]
            if changed:
                stage.dump(update_pipeline=False)
            out.append((name, changed))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptsl.ops.relock", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stages", nargs="*", help="stage names (train@mt10_care-1 ...)")
    ap.add_argument("--all", action="store_true",
                    help="every training, evaluation and task-branch stage with a dvc.lock "
                    "entry")
    ap.add_argument("--study", default=None, help="a study's pipeline instead of the project's")
    args = ap.parse_args(argv)
    root = Path.cwd()
    try:
        if bool(args.stages) == args.all:
            raise ConfigError("stages: name some stages or give --all, not both")
        folder = root
        if args.study is not None:
            known = [p.name for p in study_dirs(root)]
            if args.study not in known:
                raise ConfigError(f"--study: unknown study {args.study!r}; allowed: "
                                  f"{', '.join(known) or 'none'}")
            folder = root / STUDIES / args.study
        if not (folder / "dvc.lock").is_file():
            raise ConfigError(f"{folder / 'dvc.lock'}: not found; allowed: a pipeline that ran")
        result = relock(folder, None if args.all else list(args.stages))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    changed = [(n, c) for n, c in result if c]
    for name, deps in changed:
        print(f"{name}: {', '.join(deps)}")
    print(f"{len(changed)} of {len(result)} stage(s) recorded against the current dependencies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
