"""The package's layers and the stages' cache keys.

- Import rules: ``ptsl.core`` imports nothing from the rest of the package and no MLflow, DVC,
  Ray or matplotlib; ``ptsl.ops`` imports the core, the commands' shared parser (``ptsl.cli``,
  which imports only the core's errors) and itself; ``ptsl.report`` the core, ``ptsl.cli``, the
  params file (``ptsl.ops.params``) and itself. Every import statement counts, lazy ones too.
- No import circle among the modules of ``ptsl.ops`` (nor of ``ptsl.report`` or ``ptsl.tools``):
  none imports a module that imports it back, directly or through others (lazy imports count: a
  circle broken only by a function-level import still ties the two modules together).
- A stage depends on the code that computes its outputs: dvc.yaml lists folders (the core for
  training and evaluation), and everything else a stage script runs is ``ptsl.ops`` code, which
  writes none of its outputs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from ..conftest import ROOT

SRC = ROOT / "src"
PTSL = SRC / "ptsl"
#: What each layer may import from the package.
MAY_IMPORT = {
    "core": ("ptsl.core",),
    "ops": ("ptsl.core", "ptsl.cli", "ptsl.ops"),
    "report": ("ptsl.core", "ptsl.cli", "ptsl.ops.params", "ptsl.report"),
}
#: What the commands' shared parser may import: it sits below every layer but the core.
CLI_MAY_IMPORT = ("ptsl.core.errors",)
#: Libraries the core must not import: its results must not depend on tracking, pipeline
#: tools or plotting.
NOT_IN_CORE = ("mlflow", "dvc", "ray", "matplotlib")


def _module_of(path: Path, src: Path) -> str:
    """``ptsl.core.loop`` for src/ptsl/core/loop.py ("" for a script outside ``src``)."""
    if src not in path.parents:
        return ""
    rel = path.relative_to(src).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_modules(path: Path, src: Path = SRC) -> set[str]:
    """Absolute module names ``path`` imports, anywhere in the file (``from m import x`` yields
    m and m.x: x may be a submodule)."""
    module = _module_of(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
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


def _module_file(module: str, src: Path = SRC) -> Path | None:
    base = src.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _package_modules(imports: set[str], src: Path = SRC) -> set[str]:
    """The ``ptsl`` modules among ``imports`` that are files (not names inside a module)."""
    return {m for m in imports if m.split(".")[0] == "ptsl" and _module_file(m, src) is not None}


def violations(layer: str, src: Path = SRC) -> list[str]:
    """``<file> imports <module>`` for every import of ``layer`` that its rule forbids."""
    out = []
    for path in sorted((src / "ptsl" / layer).rglob("*.py")):
        rel = path.relative_to(src)
        out += [f"{rel} imports {m}" for m in sorted(_package_modules(imported_modules(path, src),
                                                                      src))
                if not m.startswith(MAY_IMPORT[layer])]
        if layer == "core":
            out += [f"{rel} imports {m}" for m in sorted(imported_modules(path, src))
                    if m.split(".")[0] in NOT_IN_CORE]
    return out


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_each_layer_imports_only_what_it_may(layer):
    assert list((PTSL / layer).rglob("*.py"))
    assert violations(layer) == [], f"{layer} may import {', '.join(MAY_IMPORT[layer])}"


def test_the_shared_parser_imports_only_the_errors():
    imports = _package_modules(imported_modules(PTSL / "cli.py"))
    assert imports and all(m.startswith(CLI_MAY_IMPORT) for m in imports), imports


def import_circles(layer: str = "ops", src: Path = SRC) -> list[str]:
    """Each import circle among the modules of ``layer``, as ``a -> b -> a``: one per group of
    modules that reach each other, from the first of the group by name."""
    prefix = f"ptsl.{layer}."
    graph: dict[str, set[str]] = {}
    for path in sorted((src / "ptsl" / layer).rglob("*.py")):
        if path.name != "__init__.py":  # a package's __init__ runs before any of its modules
            graph[_module_of(path, src)] = {
                m for m in _package_modules(imported_modules(path, src), src)
                if m.startswith(prefix) and _module_file(m, src).name != "__init__.py"}

    def reach(start: str) -> dict[str, str | None]:
        """Every module ``start`` reaches, each with the module it was first reached from."""
        parent: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            here = todo.pop(0)
            for there in sorted(graph.get(here, ())):
                if there not in parent:
                    parent[there] = here
                    todo.append(there)
        return parent

    circles: list[str] = []
    seen: set[str] = set()
    for module in sorted(graph):
        reached = reach(module)
        group = {m for m in reached if m != module and module in reach(m)}
        if module in seen or not group:
            continue
        seen |= group | {module}
        last = min(m for m in group if module in graph[m])  # imports ``module`` back
        ring = [last]
        while reached[ring[-1]] is not None:
            ring.append(reached[ring[-1]])
        circles.append(" -> ".join(ring[::-1] + [module]))
    return circles


@pytest.mark.parametrize("folder", ["core", "ops", "report", "tools"])
def test_no_import_circle(folder):
    assert import_circles(folder) == [], "move the shared piece into a module both may import"


def test_an_import_circle_is_caught_lazy_imports_included(tmp_path):
    """Not vacuous: two ops modules importing each other, one of them inside a function, and a
    circle through a third module, are each reported."""
    src = tmp_path / "src"
    files = {"ptsl/__init__.py": "", "ptsl/ops/__init__.py": "",
             "ptsl/ops/a.py": "from .b import x\n",
             "ptsl/ops/b.py": "def f():\n    from . import a\n",
             "ptsl/ops/c.py": "from ptsl.ops.d import y\n",
             "ptsl/ops/d.py": "from .e import z\n",
             "ptsl/ops/e.py": "import ptsl.ops.c\n",
             "ptsl/ops/f.py": "from .a import x\n"}  # imports into a circle: not one itself
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    assert import_circles("ops", src) == ["ptsl.ops.a -> ptsl.ops.b -> ptsl.ops.a",
                                          "ptsl.ops.c -> ptsl.ops.d -> ptsl.ops.e -> ptsl.ops.c"]


def test_the_rules_catch_a_stray_import(tmp_path):
    """Not vacuous: a core module importing the tracking layer, or MLflow, is reported."""
    src = tmp_path / "src"
    for rel in ("ptsl/__init__.py", "ptsl/ops/__init__.py", "ptsl/ops/tracking.py",
                "ptsl/core/__init__.py"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("")
    (src / "ptsl/core/loop.py").write_text("import mlflow\n\ndef f():\n"
                                           "    from ..ops.tracking import start_run\n")
    assert violations("core", src) == ["ptsl/core/loop.py imports ptsl.ops.tracking",
                                       "ptsl/core/loop.py imports mlflow"]


def source_closure(script: Path) -> set[Path]:
    """Every ``src/ptsl`` file that running ``script`` may execute (parent packages'
    ``__init__.py`` included: importing a submodule runs them)."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        for module in _package_modules(imported_modules(path)):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                found = _module_file(".".join(parts[:i]))
                if found is not None and found not in seen:
                    seen.add(found)
                    todo.append(found)
    return seen


def _stages() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


#: The source deps of each stage: the folders (and the params file's module) that compute its
#: outputs; nothing else of src/ may appear in its deps.
SOURCE_DEPS = {
    "check_env": ["src/ptsl/core"],
    "train": ["src/ptsl/core"],
    "train_ptsl": ["src/ptsl/core"],
    "evaluate": ["src/ptsl/core"],
    "evaluate_ptsl": ["src/ptsl/core"],
    "branches_ptsl": ["src/ptsl/core"],
    "aggregate": ["src/ptsl/report", "src/ptsl/core", "src/ptsl/ops/params.py"],
}
#: The pins each stage depends on: the packages that compute or write its outputs.
PIN_DEPS = {
    "check_env": ["requirements/compute.txt"],
    "train": ["requirements/compute.txt"],
    "train_ptsl": ["requirements/compute.txt"],
    "evaluate": ["requirements/compute.txt", "requirements/render.txt"],
    "evaluate_ptsl": ["requirements/compute.txt", "requirements/render.txt"],
    "branches_ptsl": ["requirements/compute.txt"],
    "aggregate": ["requirements/compute.txt", "requirements/render.txt",
                  "requirements/report.txt"],
}


def _covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT)
    return any(rel == Path(d) or Path(d) in rel.parents for d in deps)


@pytest.mark.parametrize("stage", sorted(SOURCE_DEPS))
def test_a_stage_depends_on_the_code_that_computes_it(stage):
    spec = _stages()[stage]
    deps = [str(d) for d in spec["deps"]]
    script = re.search(r"python (pipeline/\w+\.py)", spec["cmd"]).group(1)
    assert script in deps
    assert [d for d in deps if d.startswith("src/")] == SOURCE_DEPS[stage]
    assert [d for d in deps if d.startswith("requirements")] == PIN_DEPS[stage]
    assert "requirements.txt" not in deps  # a tool's pin re-runs nothing
    # What the script runs beyond its listed source is the pipeline's operations (checks,
    # tracking, the params file, paths), the package's lazy __init__ and the commands' parser
    # (ptsl/cli.py): none of it writes a number of the outputs.
    closure = source_closure(ROOT / script)
    assert any(_covered(p, SOURCE_DEPS[stage]) for p in closure)
    other = sorted(str(p.relative_to(ROOT)) for p in closure if not _covered(p, deps))
    assert all(p.startswith("src/ptsl/ops/") or p in ("src/ptsl/__init__.py", "src/ptsl/cli.py")
               for p in other), \
        f"{stage}: its script runs {other} outside its deps"
    for dep in deps:
        if "$" not in dep and not dep.startswith(("data/", "reports/")):
            assert (ROOT / dep).exists(), f"{stage}: dep {dep} does not exist"


def test_training_runs_no_report_or_tool_code():
    for script in ("pipeline/train.py", "pipeline/evaluate.py", "pipeline/branches.py"):
        closure = {str(p.relative_to(PTSL)) for p in source_closure(ROOT / script)}
        assert "core/loop.py" in closure or "core/evaluation.py" in closure
        assert not [p for p in closure if p.startswith(("report/", "tools/", "api.py"))]


def test_validate_runs_first_and_every_other_stage_waits_for_it():
    """Every stage but validate depends on its output, so `dvc repro`, `dvc repro <stage>` and
    `dvc exp run` run validate before they remove any stage's outputs."""
    stages = _stages()
    assert stages["validate"]["always_changed"] is True
    assert "deps" not in stages["validate"]  # hashing them would slow every no-op repro
    (out,) = stages["validate"]["outs"]
    assert out == {"data/validated.json": {"cache": False, "persist": True}}
    assert (ROOT / "data" / "validated.json").is_file()  # in git: a clone's stages find it
    for name, spec in stages.items():
        if name != "validate":
            assert "data/validated.json" in [str(d) for d in spec["deps"]], name


def test_the_gpu_path_is_entered_from_the_loop_only():
    """core/cuda/ is imported by nothing in the core but the training loop (its one call,
    ``accelerate``) and itself: the CPU path never meets it."""
    importers = {path.relative_to(PTSL).as_posix()
                 for path in (PTSL / "core").rglob("*.py")
                 if "cuda" not in path.relative_to(PTSL / "core").parts[:1]
                 and any(m == "ptsl.core.cuda" or m.startswith("ptsl.core.cuda.")
                         for m in imported_modules(path))}
    assert importers == {"core/loop.py"}


_STEP_TRACE = """
import sys, threading
from pathlib import Path
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.log import NoLog
from ptsl.core.loop import Training
from ptsl.core.persistence import ResumeCheckpoints
from ptsl.core.runtime import Runtime

exp = {exp}
cfg = RunConfig(name="t", seed=1, experiment=ExperimentConfig(benchmark="mt10", **exp),
                env=EnvConfig(episode_length=20), sac=SACConfig(batch_size=32, init_steps=3),
                train=TrainConfig(steps=20, eval_every=20, checkpoint_every=20))
tr = Training(cfg, Runtime(device="cpu", vector="sync"), Path({cache!r}),
              ResumeCheckpoints(None, cfg), NoLog())
tr.open(progress=False)

def step(i):
    tr.step(i, None, None)

for i in range(4):
    step(i)
root = str(Path(sys.modules["ptsl"].__file__).parent)
files = set()

def hook(frame, event, arg):
    if frame.f_code.co_filename.startswith(root):
        files.add(frame.f_code.co_filename[len(root) + 1:])

sys.setprofile(hook)
threading.setprofile(hook)
step(4)
sys.setprofile(None)
threading.setprofile(None)
tr.close()
print("ptsl.core.cuda" in sys.modules)
print(" ".join(sorted(files)))
"""


@pytest.mark.parametrize("exp, most", [
    ({"method": "mtsac", "hidden_dim": 32, "num_layers": 2}, 8),
    ({"method": "care_ptsl", "hidden_dim": 32, "num_layers": 2, "pal_dim": 8}, 11),
])
def test_one_cpu_training_step_runs_few_files_and_none_of_the_gpu_path(exp, most, task_cache):
    """The code one training step runs on CPU (act, update, environment step, store), traced:
    none of it in core/cuda (which is not even imported), and few files to read: the loop, the
    environments, the agent and its optimiser, the buffer, the fault points and the method's
    networks."""
    import subprocess
    import sys

    code = _STEP_TRACE.format(exp=exp, cache=str(task_cache))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported, files = proc.stdout.splitlines()[-2:]
    files = files.split()
    assert imported == "False"
    assert not [f for f in files if f.startswith("core/cuda/")]
    assert {"core/loop.py", "core/agent/sac.py", "core/agent/buffer.py", "core/envs.py"} <= set(files)
    assert len(files) <= most, files
