"""Every command answers as the stages do. The commands are found, not listed: each module of
src/ptsl with an ``if __name__ == "__main__":`` block (run as ``python -m ptsl...``) and each
stage script of pipeline/, so a new one is covered the day it is added. Each one

- answers ``--help`` with its usage and exit status 0;
- refuses an option it does not know with one error line naming it and a non-zero exit, even
  when a required argument is missing too;
- answers the bad inputs of :data:`BAD_INPUTS` (a missing or malformed file, a study that does
  not exist, a count of 0) with one line ``error: ...`` naming what is wrong, and a non-zero
  exit;

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

#: (command, arguments, files written into its empty folder first, what its one line names).
#: Each fails before any work: none trains, evaluates or writes.
BAD_INPUTS = [
    ("ptsl.tools.counting", ["--params", "nope.yaml"], {}, "nope.yaml: params file not found"),
    ("ptsl.tools.branches_along", ["--resume-dir", "nope", "--out", "out"], {},
     "--resume-dir: nope is not a folder"),
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
    ("ptsl.tools.eval_cost", ["--episodes", "0"], {}, "--episodes"),
    ("ptsl.tools.learning_check", ["--steps", "0"], {}, "--steps"),
    ("ptsl.tools.learning_check", ["--seed", "x"], {}, "--seed"),
    ("ptsl.tools.pilot", ["--study", "nope"], {}, "--study: no studies/nope/params.yaml"),
    ("ptsl.tools.reward_check", ["--episodes", "0"], {}, "--episodes"),
    ("ptsl.tools.same_bytes", ["--params", "nope.yaml", "--before", str(ROOT), "--after",
                               str(ROOT)], {}, "nope.yaml: params file not found"),
    ("ptsl.tools.study_time", ["nope"], {}, "no study 'nope'"),
    ("ptsl.tools.power", ["nope"], {}, "no study 'nope'"),
    ("ptsl.tools.power", [], {}, "name a study or give --sd with --pairs"),
    ("ptsl.tools.power", ["--sd", "0.1"], {}, "--sd and --pairs go together"),
    ("ptsl.tools.power", ["--sd", "0.1", "--pairs", "1"], {}, "--pairs: '1'; allowed: a whole"),
    ("ptsl.tools.power", ["--sd", "0.1", "--pairs", "5", "--power", "1"], {},
     "--power: '1'; allowed: a number between 0 and 1, both excluded"),
    ("ptsl.tools.power", ["--sd", "-1", "--pairs", "5"], {}, "--sd: '-1'; allowed: a number above 0"),
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
                                  dict(files)) for i, (name, args, files) in enumerate(jobs)])
    return dict(zip(jobs, got))


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
    (tmp_path / "src" / "ptsl").mkdir(parents=True)
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "bad.py").write_text(
        'import argparse, sys\n\n'
        'if __name__ == "__main__":\n'
        '    args = argparse.ArgumentParser().parse_args()\n'
        '    open("nope.yaml")\n')
    (tmp_path / "pipeline" / "deaf.py").write_text(
        'if __name__ == "__main__":\n    print("did its work")\n')
    (tmp_path / "pipeline" / "helper.py").write_text("def main():\n    pass\n")
    found = entry_points(tmp_path)
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
