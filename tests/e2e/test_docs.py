"""Every example, command and link in README.md and docs/*.md still works, so the docs cannot rot.

- Each ```python block right after an ``<!-- api-example ... -->`` comment runs in a fresh
  process from an empty folder (the project installed, nothing else there); the first example
  of a file that shows "The first example prints" must print exactly that. Other ```python
  blocks need a pipeline run first (``load_agent("data/runs/...")``): they must compile and
  their imports must resolve.
- Each command line of a ```bash / ```sh block is checked without doing its work: a module or
  stage script answers ``--help``, a make target exists (``make -n``), a dvc subcommand answers
  ``--help``, any other program is on PATH or known to live only on other machines.
- Relative links point at files (and headings) that exist.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ..conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!-- api-example[^>]*-->\s*```python\n(.*?)```", re.S)
PYTHON_BLOCK = re.compile(r"(<!-- api-example[^>]*-->\s*)?```python\n(.*?)```", re.S)
SHELL_BLOCK = re.compile(r"```(?:bash|sh)\n(.*?)```", re.S)
FENCE = re.compile(r"```.*?```", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>")
#: Programs the docs run on machines other than this one (a GPU box, a cluster's nodes).
ELSEWHERE = {"nvidia-smi"}
#: Shell builtins: nothing to look up.
BUILTINS = {"source", ".", "export", "cd", "echo", "set", "unset"}
#: Where the project's tools live: `make` puts it on PATH and the docs say to activate it.
VENV_BIN = str(Path(sys.executable).parent)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _examples() -> list[tuple[Path, int, str]]:
    return [(doc, i, code) for doc in DOCS
            for i, code in enumerate(MARKER.findall(doc.read_text()))]


# --------------------------------------------------------------------------------------------
# Python examples


def test_the_api_examples_are_where_the_docs_say():
    where = {_rel(doc): [code for d, _, code in _examples() if d == doc] for doc in DOCS}
    readme, api = where["README.md"], where["docs/api.md"]
    assert len(readme) == 1 and '"mtsac", "reach-v3"' in readme[0]
    assert len(readme[0].strip().splitlines()) <= 10  # the README's example stays short
    assert len(api) == 1 and "pal_dim=16" in api[0]
    assert "The first example prints" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("doc,index,code", _examples(),
                         ids=[f"{_rel(d)}:{i}" for d, i, _ in _examples()])
def test_api_example_runs(doc, index, code, tmp_path, task_cache):
    # Share the session's Meta-World goal cache (MT10's goals take ~20 s to generate).
    (tmp_path / ".scratch").mkdir()
    (tmp_path / ".scratch" / "tasks").symlink_to(task_cache, target_is_directory=True)
    (tmp_path / "example.py").write_text(code)
    # One torch thread, as in the test process (conftest.py): torch's threads spin on busy cores.
    env = dict(os.environ, PTSL_TRACKING="off", PTSL_THREADS="1")
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    if '"mtsac", "reach-v3"' in code:
        assert lines[0].split() == ["step", "success", "return"] and len(lines) == 6
        assert lines[4].startswith("{'reach-v3': ")
    if "pal_dim=16" in code:
        assert [line.split(":")[0] for line in lines[:3]] == ["step 0", "step 50", "step 100"]
        assert re.fullmatch(r"[\d,]+ parameters, \d+ s", lines[3])
        assert 0.0 <= float(lines[4]) <= 1.0
    shown = re.search(r"The first example prints[^\n]*\n\n```\n(.*?)```", doc.read_text(), re.S)
    if index == 0 and shown is not None:
        # The output the file shows is this run's: the same words, and the same numbers up to
        # the last digits, which differ between kinds of CPU (MuJoCo's and torch's vector
        # instructions; on one kind of CPU a run gives the same bytes every time).
        assert _words(proc.stdout) == _words(shown.group(1))
        assert _numbers(proc.stdout) == pytest.approx(_numbers(shown.group(1)), rel=1e-4,
                                                        abs=1e-6)


NUMBER = re.compile(r"[-+]?\d+\.\d+(?:[eE][-+]?\d+)?|[-+]?\d+")


def _numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def _words(text: str) -> list[str]:
    # numpy pads a number shorter than its column's widest with spaces ("-0.0915724 ]]"), so
    # a last digit that differs between kinds of CPU can move a bracket off its number.
    return re.sub(r"\s+(?=\])", "", NUMBER.sub("#", text)).split()


def _other_python_blocks() -> list[tuple[Path, str]]:
    return [(doc, m.group(2)) for doc in DOCS for m in PYTHON_BLOCK.finditer(doc.read_text())
            if not m.group(1)]


def test_other_python_blocks_compile_and_import():
    """They need a trained pipeline to run, but a renamed function or module still shows."""
    blocks = _other_python_blocks()
    assert blocks  # the trained-agent example in docs/api.md
    for doc, code in blocks:
        tree = ast.parse(code, filename=_rel(doc))
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                # In this process: torch is loaded already (conftest.py), so this costs little.
                exec(compile(ast.Module([node], []), _rel(doc), "exec"), {})


# --------------------------------------------------------------------------------------------
# Command lines


def command_lines(text: str) -> list[str]:
    """The lines of the shell blocks worth checking: no comments, no continuation lines (their
    command's first line is checked), none with a placeholder such as ``<stage>``."""
    out = []
    for block in SHELL_BLOCK.findall(text):
        continued = False
        for raw in block.splitlines():
            line, follows = raw.strip(), continued
            continued = line.endswith("\\")
            if follows or not line or line.startswith("#"):
                continue
            if PLACEHOLDER.search(line.split(" #")[0]):
                continue
            out.append(line.rstrip("\\").strip())
    return out


def simple_commands(line: str) -> list[list[str]]:
    """``a && b | c; d`` as its simple commands, comments dropped, leading VAR=value dropped."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    commands, current = [], []
    for token in [*lex, ";"]:
        if token in {"&&", "||", ";", "|", "&"}:
            while current and re.fullmatch(r"[A-Za-z_]\w*=.*", current[0]):
                current = current[1:]
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    return commands


def _module_check(module: str) -> list[str] | str:
    """The argv that proves ``python -m module`` works, or the reason it cannot."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        return f"no module {module}"
    source = Path(spec.origin)
    if spec.submodule_search_locations is not None:  # a package runs its __main__
        source = Path(spec.origin).parent / "__main__.py"
        if not source.is_file():
            return f"{module} is a package without __main__"
    text = source.read_text()
    if "ArgumentParser" not in text:
        # No parser: --help would do the module's work (rewrite the README, count, serve).
        compile(text, str(source), "exec")
        return [] if '__name__ == "__main__"' in text else f"{module} has no __main__ block"
    return [sys.executable, "-m", module, "--help"]


def check_for(argv: list[str]) -> list[str] | str:
    """What to run to check one simple command cheaply: an argv (exit 0 expected), [] when a
    look-up already settled it, or a string saying why it fails."""
    prog, args = argv[0], argv[1:]
    name = Path(prog).name
    if prog in BUILTINS:
        return []
    if "/" in prog and not (ROOT / prog).exists():  # .venv/bin/pip: relative to the project
        return f"{prog} does not exist"
    if name == "python" or name.startswith("python3"):
        if args[:1] == ["-m"] and len(args) > 1:
            return _module_check(args[1])
        if args[:1] == ["-c"] and len(args) > 1:
            compile(args[1], "<-c>", "exec")
            return []
        if args and args[0].endswith(".py"):
            script = ROOT / args[0]
            return [sys.executable, str(script), "--help"] if script.is_file() else \
                f"{args[0]} does not exist"
        return f"unchecked python invocation: {argv}"
    if name == "make":
        return ["make", "-n", *[a for a in args if not a.startswith("-")]]
    if name == "dvc":
        if not shutil.which("dvc", path=os.pathsep.join([VENV_BIN, os.environ.get("PATH", "")])):
            return "dvc is not installed"
        words = []
        for a in args:
            if not re.fullmatch(r"[a-z][a-z-]*", a):
                break
            words.append(a)
        return ["dvc", *words, "--help"]
    path = os.pathsep.join([os.environ.get("PATH", ""), VENV_BIN])
    if "/" in prog or shutil.which(prog, path=path) or prog in ELSEWHERE:
        return []
    return f"{prog} is not on PATH and not listed as found only elsewhere"


def _makefile_copy(folder: Path) -> Path:
    """The Makefile with what its rules name as prerequisites, and nothing heavy."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel in ("Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy(ROOT / rel, folder / rel)
    shutil.copytree(ROOT / "requirements", folder / "requirements")
    return folder


def run_checks(lines: list[str], folder: Path) -> dict[str, str]:
    """``{line: ""}`` when a line checks out, else what went wrong; checks run in parallel."""
    work = _makefile_copy(folder)
    env = dict(os.environ, PTSL_TRACKING="off")

    def plan_of(line: str) -> list[list[str] | str]:
        try:
            return [check_for(cmd) for cmd in simple_commands(line)]
        except (SyntaxError, ValueError) as exc:  # python -c code, unbalanced quotes
            return [f"does not parse: {exc}"]

    plans = {line: plan_of(line) for line in lines}

    def run(argv: tuple[str, ...]) -> str:
        proc = subprocess.run(list(argv), cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        return "" if proc.returncode == 0 else \
            f"`{' '.join(argv)}` exited {proc.returncode}: {(proc.stderr or proc.stdout)[-500:]}"

    todo = sorted({tuple(p) for plan in plans.values() for p in plan if isinstance(p, list) and p})
    dvc = [argv for argv in todo if argv[0] == "dvc"]
    others = [argv for argv in todo if argv[0] != "dvc"]
    with ThreadPoolExecutor(max_workers=8) as pool:
        dvc_results = pool.submit(dvc_help, dvc, work)
        results = dict(zip(others, pool.map(run, others)))
        results.update(dvc_results.result())
    out = {}
    for line, plan in plans.items():
        problems = [p if isinstance(p, str) else results[tuple(p)] for p in plan if p]
        out[line] = "; ".join(p for p in problems if p)
    return out


#: `dvc <args>` for each argv on stdin's lines, in one process: importing dvc once instead of
#: once per command keeps the check to a fraction of a second.
DVC_HELP = """
import contextlib, io, json, sys
from dvc.cli import main
out = []
for line in sys.stdin.read().splitlines():
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = main(json.loads(line))
    except SystemExit as exc:
        rc = exc.code
    out.append([rc or 0, buf.getvalue()[-500:]])
print(json.dumps(out))
"""


def dvc_help(commands: list[tuple[str, ...]], cwd: Path) -> dict[tuple[str, ...], str]:
    """``dvc SUB --help`` for every command: "" when it exits 0, else why."""
    if not commands:
        return {}
    proc = subprocess.run([sys.executable, "-c", DVC_HELP], cwd=cwd, capture_output=True,
                          text=True, timeout=300,
                          input="\n".join(json.dumps(list(c[1:])) for c in commands))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {c: "" if rc == 0 else f"`{' '.join(c)}` exited {rc}: {out}"
            for c, (rc, out) in zip(commands, json.loads(proc.stdout.splitlines()[-1]))}


def _doc_lines() -> list[tuple[str, str]]:
    return [(_rel(doc), line) for doc in DOCS for line in command_lines(doc.read_text())]


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, str]:
    return run_checks(sorted({line for _, line in _doc_lines()}),
                      tmp_path_factory.mktemp("commands"))


def test_the_docs_show_the_everyday_commands():
    readme = command_lines((ROOT / "README.md").read_text())
    for expected in ("make repro", "make test", "make test-unit", "dvc repro", "make exps",
                     "dvc exp run -S pal_dim=32", "make ui"):
        assert any(line.split()[:len(expected.split())] == expected.split() for line in readme), \
            expected


@pytest.mark.parametrize("doc,line", _doc_lines())
def test_command_line_works(checked, doc, line):
    assert checked[line] == "", f"{doc}: {line}: {checked[line]}"


def test_the_command_checks_can_fail(tmp_path):
    """Not vacuous: a misspelt module, script, target, subcommand or program is reported."""
    bad = ["python -m ptsl.ops.gird --dry", "python pipeline/trian.py --exp x",
           "make repor", "dvc exp shwo", "nosuch-program --flag", "python -m ptsl.ops"]
    assert all(run_checks(bad, tmp_path).values())
    assert run_checks(["make repro  # it's fine", "FOO=1 dvc repro && dvc exp show"],
                      tmp_path / "again") == {"make repro  # it's fine": "",
                                              "FOO=1 dvc repro && dvc exp show": ""}


# --------------------------------------------------------------------------------------------
# Links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = FENCE.sub("", doc.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+)$", text, re.M)}


def broken_links(doc: Path) -> list[str]:
    out = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            out.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            out.append(f"{target}: no such heading")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_relative_links_resolve(doc):
    assert broken_links(doc) == []


def test_the_link_check_can_fail(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n[ok](a.md#top) [gone](b.md) [no](a.md#bottom)\n")
    assert broken_links(tmp_path / "a.md") == ["b.md: no such file", "a.md#bottom: no such heading"]


def test_every_docs_page_is_linked_from_the_readme():
    """A page nobody links to is a page nobody reads (the README's "Read more")."""
    targets = LINK.findall((ROOT / "README.md").read_text())
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in targets}
    assert [_rel(d) for d in DOCS[1:] if d.resolve() not in linked] == []


# --------------------------------------------------------------------------------------------
# docs/speed.md: a reference page; what was measured when is in reports/bench/HISTORY.md

SPEED = ROOT / "docs" / "speed.md"
#: A date or a commit id (7 to 40 hex digits).
DATED = re.compile(r"\d{4}-\d{2}-\d{2}|\b[0-9a-f]{7,40}\b", re.I)
LINK_TARGET = re.compile(r"\]\([^)\s]+\)")


def dated_lines(text: str) -> list[str]:
    """The lines that carry a date or a commit id outside a link's target (a record's folder,
    such as ``reports/bench/2026-11-28d-h200/``, may carry its date in a link)."""
    return [line for line in text.splitlines() if DATED.search(LINK_TARGET.sub("]()", line))]


def test_speed_is_a_reference_page():
    text = SPEED.read_text()
    assert len(text.splitlines()) <= 250
    assert dated_lines(text) == []
    # Seed groups were measured and not kept: the page says so once, and describes no such API.
    assert not re.search(r"SeedGroup|train_group|batch_updates|--seed \d+ --seed", text)


def test_studies_is_a_reference_page():
    """docs/studies.md states what is: no date or commit id outside a record's link, and every
    study script it names exists (the command check takes a path as found)."""
    text = (ROOT / "docs" / "studies.md").read_text()
    assert dated_lines(text) == []
    scripts = set(re.findall(r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)+\.sh)\b", text))
    assert "tools/study/continue.sh" in scripts
    assert [s for s in sorted(scripts) if not (ROOT / s).is_file()] == []


def test_the_dated_check_can_fail():
    text = ("[record](../reports/bench/2026-11-27i-h200/README.md): 0.92x\n"
            "project at 3a00f38\n"
            "[2026-11-28b-h200/](../reports/bench/2026-11-28b-h200/README.md)\n"
            "measured on 2026-11-25\n"
            "1,063.0 vector steps/s, 1007.7 ms\n")
    assert dated_lines(text) == text.splitlines()[1:4]
