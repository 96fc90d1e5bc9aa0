"""dvc.yaml lists, per stage, the source files its script can run, so that editing the report code
never re-trains a model, and editing model code always does.

The closure is computed from the import statements (anywhere in a file, so lazy imports count) of
the stage script, following ``ptsl`` imports transitively; importing a submodule runs its parent
packages' ``__init__.py`` too, so those count as well.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

SRC = ROOT / "src"


def _module_file(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_modules(path: Path, package: str) -> set[str]:
    """Absolute module names ``path`` imports (``from m import x`` yields m and m.x: x may be a
    submodule)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
    return out


def source_closure(script: Path) -> set[Path]:
    """Every ``src/ptsl`` file that running ``script`` may execute."""
    seen: set[Path] = set()
    todo = [(script, "")]
    while todo:
        path, package = todo.pop()
        for module in _imported_modules(path, package):
            if module.split(".")[0] != "ptsl":
                continue
            parts = module.split(".")
            for i in range(1, len(parts) + 1):  # parent packages are imported first
                name = ".".join(parts[:i])
                found = _module_file(name)
                if found is not None and found not in seen:
                    seen.add(found)
                    todo.append((found, name if found.name == "__init__.py"
                                 else name.rpartition(".")[0]))
    return seen


def _stages() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT)
    return any(rel == Path(d) or Path(d) in rel.parents for d in deps)


def _cached_stages() -> list[str]:
    """Stages DVC may skip; an ``always_changed`` stage runs every time, so its deps decide
    nothing (validate lists none: hashing them would slow every no-op ``dvc repro``)."""
    return [name for name, spec in _stages().items() if not spec.get("always_changed")]


@pytest.mark.parametrize("stage", _cached_stages())
def test_stage_deps_cover_the_code_it_runs(stage):
    spec = _stages()[stage]
    script = re.search(r"python (pipeline/\w+\.py)", spec["cmd"]).group(1)
    deps = [str(d) for d in spec["deps"]]
    assert script in deps
    closure = source_closure(ROOT / script)
    assert closure, "the closure must find the ptsl modules"
    missing = sorted(str(p.relative_to(ROOT)) for p in closure if not _covered(p, deps))
    assert not missing, f"{stage}: add to its deps in dvc.yaml: {missing}"
    for dep in deps:
        if "$" not in dep and not dep.startswith(("data/", "reports/")):
            assert (ROOT / dep).exists(), f"{stage}: dep {dep} does not exist"


def test_validate_runs_first_and_every_other_stage_waits_for_it():
    """Every stage but validate depends on its output, so `dvc repro`, `dvc repro <stage>` and
    `dvc exp run` run validate before they remove any stage's outputs."""
    stages = _stages()
    assert stages["validate"]["always_changed"] is True
    assert (ROOT / re.search(r"python (pipeline/\w+\.py)", stages["validate"]["cmd"]).group(1)).is_file()
    (out,) = stages["validate"]["outs"]
    assert out == {"data/validated.json": {"cache": False, "persist": True}}
    assert (ROOT / "data" / "validated.json").is_file()  # in git: a clone's stages find it
    for name, spec in stages.items():
        if name != "validate":
            assert "data/validated.json" in [str(d) for d in spec["deps"]], name


def test_training_does_not_depend_on_report_code():
    """The point of listing files: a new table or figure never costs a re-train."""
    stages = _stages()
    for stage in ("train", "train_ptsl", "evaluate", "evaluate_ptsl"):
        deps = [str(d) for d in stages[stage]["deps"]]
        assert "src/ptsl" not in deps
        for report_file in ("report.py", "stats.py", "figures.py", "readme.py"):
            assert f"src/ptsl/{report_file}" not in deps


def test_closure_follows_relative_and_package_imports():
    closure = {p.relative_to(SRC).as_posix() for p in source_closure(ROOT / "pipeline/train.py")}
    # train.py -> ptsl.train -> .methods -> .nets.pal, and ptsl/__init__.py on the way.
    assert {"ptsl/__init__.py", "ptsl/train.py", "ptsl/methods.py", "ptsl/nets/__init__.py",
            "ptsl/nets/pal.py"} <= closure
    assert "ptsl/report.py" not in closure
