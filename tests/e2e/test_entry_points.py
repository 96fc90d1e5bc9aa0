"""Every command answers as the stages do. The commands are found, not listed: each module of
src/ptsl with an ``if __name__ == "__main__":`` block (run as ``python -m ptsl...``) and each
stage script of pipeline/, so a new one is covered the day it is added. Each one

- answers ``--help`` with its usage and exit status 0;
- refuses an option it does not know with one error line naming it and a non-zero exit, even
  when a required argument is missing too;
- answers the bad inputs of :data:`BAD_INPUTS` (a missing or malformed file, a study that does
  not exist, a number out of its range) with one line ``error: ...`` naming what is wrong, and
  a non-zero exit;
- range-checks every numeric argument where it is parsed (``ptsl.cli.whole`` / ``real``): the
  arguments are read from each command's own parser (the one its ``--help`` parsed with), so a
  new one is walked the day it is added; each, given the value its range refuses, is answered
  with one line naming it and what is allowed, a non-zero exit, and nothing written;

and never prints a traceback. Each command runs in a fresh empty folder (nothing of the project
is read or changed there). They all run in one Python process, one after another, each as
``python -m`` runs it (``runpy`` with ``__main__`` as its name and its arguments in ``sys.argv``,
its output and exit status captured; tests/commands.py): a process each would spend about a
second of a core importing torch, DVC and MLflow again, some 100 times.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from ..commands import Answer, Job, run_alone, run_in_one_process
from ..conftest import ROOT

UNKNOWN = "--no-such-option"


def has_main_block(path: Path) -> bool:
    """Whether the file has a top-level ``if __name__ == "__main__":``."""
    for node in ast.parse(path.read_text()).body:
        test = getattr(node, "test", None)
        if (isinstance(node, ast.If) and isinstance(test, ast.Compare)
                and isinstance(test.left, ast.Name) and test.left.id == "__name__"
                and len(test.comparators) == 1
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value == "__main__"):
            return True
    return False


def entry_points(root: Path = ROOT) -> dict[str, list[str]]:
    """Every command: ``ptsl.tools.counting`` -> ``python -m ptsl.tools.counting`` (a package's
    ``__main__.py`` is the package's command), ``pipeline/train.py`` -> ``python <its path>``."""
    out: dict[str, list[str]] = {}
    src = root / "src"
    for path in sorted((src / "ptsl").rglob("*.py")):
        if has_main_block(path):
            rel = path.relative_to(src).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__main__" else rel.parts
            out[".".join(parts)] = [sys.executable, "-m", ".".join(parts)]
    for path in sorted((root / "pipeline").glob("*.py")):
        if has_main_block(path):
            out[f"pipeline/{path.name}"] = [sys.executable, str(path)]
    return out


ENTRY_POINTS = entry_points()


def commands_of(root: Path, scripts: dict[str, str]) -> dict[str, list[str]]:
    """The commands the walk finds in a project at ``root`` whose pipeline/ holds ``scripts``
    (file name -> text) and whose src/ptsl is empty."""
    (root / "src" / "ptsl").mkdir(parents=True)
    (root / "pipeline").mkdir()
    for name, text in scripts.items():
        (root / "pipeline" / name).write_text(text)
    return entry_points(root)

#: (command, arguments, files written into its empty folder first, what its one line names).
#: Each fails before any work: none trains, evaluates or writes. (Each numeric argument's value
#: below its range is walked apart: :func:`bad_numbers`.)
BAD_INPUTS = [
    ("ptsl.tools.counting", ["--params", "nope.yaml"], {}, "nope.yaml: params file not found"),
    ("ptsl.tools.branches_along", ["--resume-dir", "nope", "--out", "out"], {},
     "--resume-dir: nope is not a folder"),
    ("ptsl.tools.envpool_parity", ["--tasks", "pushy"], {},
     "--tasks: pushy is not allowed"),
    ("ptsl.tools.counting", ["--params", "bad.yaml"], {"bad.yaml": "seeds: [1,\n"},
     "bad.yaml: not valid YAML"),
    ("ptsl.ops.budget", ["paper", "--params", "nope.yaml"], {}, "nope.yaml"),
    ("ptsl.ops.protocol", ["reference", "--params", "nope.yaml"], {}, "nope.yaml"),
    ("ptsl.ops.exps", ["--project", "nope"], {}, "nope/dvc.yaml: not found"),
    ("ptsl.ops.study", ["sync"], {}, "no dvc.yaml in"),
    ("ptsl.report.readme", [], {}, "README.md: no such file"),
    ("ptsl.report.readme", [], {"README.md": "# no generated block\n",
                                "reports/results.md": "# Results\n"}, "README.md has no"),
    ("ptsl.report.readme", ["--results", "nope.md"], {"README.md": "# a README\n"}, "nope.md"),
    ("ptsl.tools.bench", ["--params", "nope.yaml"], {}, "nope.yaml: params file not found"),
    ("ptsl.tools.bench", ["--only", "nope"], {}, "--only: unknown section 'nope'"),
    ("ptsl.tools.learning_check", ["--seed", "x"], {}, "--seed"),
    ("ptsl.tools.pilot", ["--study", "nope"], {}, "--study: no studies/nope/params.yaml"),
    ("ptsl.tools.same_bytes", ["--params", "nope.yaml", "--before", str(ROOT), "--after",
                               str(ROOT)], {}, "nope.yaml: params file not found"),
    ("ptsl.tools.study_time", ["nope"], {}, "no study 'nope'"),
    ("ptsl.tools.power", ["nope"], {}, "no study 'nope'"),
    ("ptsl.tools.power", [], {}, "name a study or give --sd with --pairs"),
    ("ptsl.tools.power", ["--sd", "0.1"], {}, "--sd and --pairs go together"),
    ("ptsl.tools.power", ["--sd", "0.1", "--pairs", "5", "--power", "1"], {},
     "--power: '1'; allowed: a number between 0 and 1, both excluded"),
    ("ptsl.tools.power", ["s"], {"studies/s/params.yaml": "seeds: [1]\n"},
     "no *_contrasts.csv; name contrasts"),
    ("pipeline/validate.py", ["--params", "nope.yaml"], {}, "nope.yaml: params file not found"),
    ("pipeline/check_env.py", ["--params", "nope.yaml"], {}, "nope.yaml: params file not found"),
    ("pipeline/train.py", ["--exp", "x", "--seed", "1", "--params", "nope.yaml"], {},
     "nope.yaml: params file not found"),
    ("pipeline/evaluate.py", ["--exp", "x", "--seed", "1", "--params", "nope.yaml"], {},
     "nope.yaml: params file not found"),
    ("pipeline/branches.py", ["--exp", "x", "--seed", "1", "--params", "nope.yaml"], {},
     "nope.yaml: params file not found"),
    ("pipeline/branches.py", ["--exp", "x", "--seed", "-1"], {},
     "--seed: '-1'; allowed: a whole number from 0 to 2147483647"),
    ("pipeline/aggregate.py", ["--params", "nope.yaml"], {}, "nope.yaml: params file not found"),
    ("pipeline/train.py", ["--exp", "x", "--seed", "1", "--params", "bad.yaml"],
     {"bad.yaml": "seeds: 5\n"}, "env: missing required key"),
]


def _env() -> dict[str, str]:
    env = {**os.environ, "PTSL_TRACKING": "off"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _run(command: list[str], args: list[str], files: dict[str, str], folder: Path) -> Answer:
    return run_in_one_process([Job(command, args, folder, _env(), files)])[0]


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[tuple, Answer]:
    """Every command's answer to ``--help``, to :data:`UNKNOWN` and to its bad inputs."""
    base = tmp_path_factory.mktemp("entry-points")
    jobs = [(name, ("--help",), ()) for name in ENTRY_POINTS]
    jobs += [(name, (UNKNOWN,), ()) for name in ENTRY_POINTS]
    jobs += [(name, tuple(args), tuple(files.items()))
             for name, args, files, _ in BAD_INPUTS if name in ENTRY_POINTS]
    got = run_in_one_process([Job(ENTRY_POINTS[name], list(args), base / str(i), _env(),
                                  dict(files), describe=args == ("--help",))
                              for i, (name, args, files) in enumerate(jobs)])
    return dict(zip(jobs, got))


def bad_numbers(commands: dict[str, list[str]], described: dict[str, list[dict]],
                base: Path) -> dict[str, list[tuple[dict, str | None, Path, Answer | None]]]:
    """Each command's numeric arguments (``described``: from its ``--help`` answer), each with
    each value its range refuses, the folder that ran in and the answer (value and answer None:
    it has no range), all run in one process."""
    walk = [(name, arg, value) for name in commands for arg in described[name]
            for value in arg["outside"] or [None]]
    walk = [(name, arg, value, base / str(i)) for i, (name, arg, value) in enumerate(walk)]
    ranged = [(name, arg, value, folder) for name, arg, value, folder in walk if value is not None]
    base.mkdir(parents=True, exist_ok=True)
    got = run_in_one_process([Job(commands[name], [*arg["path"], *(
        [] if arg["positional"] else [arg["option"]]), value], folder, _env())
        for name, arg, value, folder in ranged]) if ranged else []
    answer = dict(zip((folder for *_, folder in ranged), got))
    out: dict[str, list[tuple[dict, str | None, Path, Answer | None]]] = {n: [] for n in commands}
    for name, arg, value, folder in walk:
        out[name].append((arg, value, folder, answer.get(folder)))
    return out


def numeric_problems(walked: list[tuple[dict, str | None, Path, Answer | None]]) -> list[str]:
    """What is wrong with a command's answers to its numeric arguments' bad values: an argument
    without a range type, a seed without the upper bound the config has (MAX_SEED), or an answer
    that is not one line naming it and what is allowed with a non-zero exit and nothing written."""
    out = []
    for arg, value, folder, proc in walked:
        name = " ".join([*arg["path"], arg["option"]])
        if proc is None:
            out.append(f"{name}: not range-checked where it is parsed (type {arg['type']}); "
                       "use ptsl.cli.whole or real")
            continue
        seed = arg["option"].rsplit("-", 1)[-1] == "seed"  # --seed, --first-seed; not --seeds
        if seed and value == arg["outside"][0] and len(arg["outside"]) < 2:
            out.append(f"{name}: a seed without an upper bound; use whole(0, MAX_SEED)")
        lines = _error_lines(proc)
        if (proc.returncode == 0 or "Traceback" in proc.stderr or len(lines) != 1
                or arg["option"] not in lines[0] or "allowed:" not in lines[0]):
            out.append(f"{name} {value}: exit {proc.returncode}, {proc.stderr[-500:]!r}")
        elif folder.exists() and any(folder.iterdir()):
            out.append(f"{name} {value}: wrote {sorted(p.name for p in folder.iterdir())}")
    return out


@pytest.fixture(scope="module")
def numbers(answers, tmp_path_factory) -> dict[str, list[tuple[dict, str | None, Path,
                                                                Answer | None]]]:
    """Every command's numeric arguments and its answers to their bad values."""
    described = {name: answers[(name, ("--help",), ())].numeric or [] for name in ENTRY_POINTS}
    return bad_numbers(ENTRY_POINTS, described, tmp_path_factory.mktemp("numbers"))


def _error_lines(proc: Answer) -> list[str]:
    return [line for line in proc.stderr.splitlines() if "error" in line.lower()]


def test_the_commands_are_found():
    """Not vacuous: the walk finds the stage scripts, the package's commands of each folder and
    a package run as a command (``ptsl.tools.bench``'s ``__main__.py``), and nothing else (the
    API mentions ``__main__`` only in a docstring)."""
    assert {"pipeline/train.py", "pipeline/validate.py", "ptsl.ops.budget", "ptsl.ops.study",
            "ptsl.report.readme", "pipeline/branches.py", "ptsl.tools.counting",
            "ptsl.tools.bench"} <= set(ENTRY_POINTS)
    assert "ptsl.api" not in ENTRY_POINTS and "ptsl.tools.bench.record" not in ENTRY_POINTS
    assert {name for name, *_ in BAD_INPUTS} <= set(ENTRY_POINTS)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_help(answers, name):
    proc = answers[(name, ("--help",), ())]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: "), proc.stdout[:500]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_an_unknown_option_is_named_in_one_line(answers, name):
    proc = answers[(name, (UNKNOWN,), ())]
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = _error_lines(proc)
    assert len(lines) == 1 and UNKNOWN in lines[0], proc.stderr[-2000:]


def test_the_numeric_arguments_are_found(numbers):
    """Not vacuous: the walk reads the commands' own parsers, sub-commands and repeatable
    options included."""
    found = {(name, arg["option"]) for name, walked in numbers.items() for arg, *_ in walked}
    assert {("pipeline/evaluate.py", "--seed"), ("pipeline/train.py", "--seed"),
            ("ptsl.ops.grid", "--workers"), ("ptsl.ops.grid", "--gpus-per-run"),
            ("ptsl.tools.bench", "--node-seconds"), ("ptsl.tools.pilot", "--seed"),
            ("ptsl.tools.power", "--alpha")} <= found, sorted(found)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_every_numeric_argument_is_checked_where_it_is_parsed(numbers, name):
    problems = numeric_problems(numbers[name])
    assert not problems, "\n".join(problems)


def test_the_numeric_walk_catches_an_unchecked_or_a_silent_number(tmp_path):
    """The checks can fail: a plain ``type=int``, a number with no type, a range whose refusal
    is not one line naming the argument (a command that prints a traceback instead), and a seed
    with no upper bound (which the run's config refuses later, in a pydantic traceback)."""
    commands = commands_of(tmp_path, {"loose.py": (
        'import argparse\nfrom ptsl.cli import ArgumentParser, Bounded, whole\n\n'
        'if __name__ == "__main__":\n'
        '    ap = ArgumentParser()\n'
        '    sub = ap.add_subparsers(dest="command")\n'
        '    one = sub.add_parser("one")\n'
        '    one.add_argument("--steps", type=int, default=2)\n'
        '    one.add_argument("--rate", default=0.5)\n'
        '    one.add_argument("--ok", type=whole(1), default=1)\n'
        '    one.add_argument("--loud", type=Bounded(int, lambda v: 1 / v, "x", ("0",)))\n'
        '    one.add_argument("--seed", type=whole(0), default=1)\n'
        '    ap.parse_args()\n')})
    help_ = run_in_one_process([Job(commands["pipeline/loose.py"], ["--help"], tmp_path / "help",
                                    _env(), describe=True)])[0]
    assert [a["option"] for a in help_.numeric] == ["--steps", "--rate", "--ok", "--loud",
                                                    "--seed"]
    walked = bad_numbers(commands, {"pipeline/loose.py": help_.numeric}, tmp_path / "walk")
    problems = numeric_problems(walked["pipeline/loose.py"])
    assert [p.split(":")[0].split(" ")[:2] for p in problems] == [
        ["one", "--steps"], ["one", "--rate"], ["one", "--loud"], ["one", "--seed"]], problems


@pytest.mark.parametrize("name, args, files, named", BAD_INPUTS,
                         ids=[f"{n} {' '.join(a)}" + (" (files)" if f else "")
                              for n, a, f, _ in BAD_INPUTS])
def test_bad_input_is_one_line(answers, name, args, files, named):
    proc = answers[(name, tuple(args), tuple(files.items()))]
    assert proc.returncode != 0, proc.stdout[-1000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = _error_lines(proc)
    assert len(lines) == 1 and named in lines[0], proc.stderr[-2000:]


def test_the_walk_and_the_checks_catch_a_bad_command(tmp_path):
    """The checks can fail: a command found by the walk that prints a traceback for a missing
    file (as ``ptsl.tools.counting`` did), and one without --help that ignores its arguments
    (as ``ptsl.report.readme`` did), each fail them."""
    found = commands_of(tmp_path, {
        "bad.py": ('import argparse, sys\n\n'
                   'if __name__ == "__main__":\n'
                   '    args = argparse.ArgumentParser().parse_args()\n'
                   '    open("nope.yaml")\n'),
        "deaf.py": 'if __name__ == "__main__":\n    print("did its work")\n',
        "helper.py": "def main():\n    pass\n"})
    assert set(found) == {"pipeline/bad.py", "pipeline/deaf.py"}
    bad = _run(found["pipeline/bad.py"], [], {}, tmp_path / "run-bad")
    assert bad.returncode != 0 and "Traceback" in bad.stderr
    deaf_help = _run(found["pipeline/deaf.py"], ["--help"], {}, tmp_path / "run-help")
    deaf_unknown = _run(found["pipeline/deaf.py"], [UNKNOWN], {}, tmp_path / "run-unknown")
    assert not deaf_help.stdout.startswith("usage: ")
    assert deaf_unknown.returncode == 0 and not _error_lines(deaf_unknown)


@pytest.mark.parametrize("name", ["pipeline/train.py", "ptsl.ops.grid"])
def test_a_command_answers_alone_as_it_does_in_the_shared_process(answers, name, tmp_path):
    """The shared process is faithful: a stage script and a package's command, each started as
    its own process, print the same usage and refuse the unknown option with the same line."""
    for args in (["--help"], [UNKNOWN]):
        alone = run_alone(Job(ENTRY_POINTS[name], args, tmp_path, _env()))
        shared = answers[(name, tuple(args), ())]
        assert (alone.returncode, alone.stdout) == (shared.returncode, shared.stdout)
        assert _error_lines(alone) == _error_lines(shared)
