"""Run many commands (``python -m ptsl...``, ``python pipeline/<stage>.py``) one after another in
one fresh Python process, each as its own process would run it, and collect what each printed
and its exit status.

A process per command spends about a second of a core importing torch, DVC and MLflow again; the
tests that run dozens of commands which fail before any work (``--help``, bad input) share one.
Each command runs with ``runpy`` under the name ``__main__``, its arguments in ``sys.argv``, in its
own folder and with its own environment (``os.environ`` replaced for it, restored after), its
output and exit status captured. The tests that use this also run a command in a process of its
own and check that it answers the same (``test_entry_points``, ``test_bad_input``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Runs each job of a JSON list (``{command, args, files, folder, env, describe}``) and prints a
#: JSON list of ``[returncode, stdout, stderr, numeric]``. An exception that escapes a command is
#: printed as the interpreter prints it (a traceback, exit status 1). ``numeric``: for a job with
#: ``describe``, the numeric arguments of the first parser the command parsed with (and of its
#: sub-commands), as its ``numeric_arguments`` describes them (:class:`Answer`); else None.
DRIVER = r"""
import argparse, contextlib, io, json, os, runpy, sys, traceback, warnings
warnings.simplefilter("ignore", RuntimeWarning)  # runpy: a module another one imported already
parsers = []
parse_args = argparse.ArgumentParser.parse_args
def recording(self, *args, **kwargs):  # every parser a command parses with, ptsl.cli's too
    parsers.append(self)
    return parse_args(self, *args, **kwargs)
argparse.ArgumentParser.parse_args = recording
def numeric_arguments(parser, path=()):
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += numeric_arguments(sub, (*path, name))
            continue
        outside = getattr(action.type, "outside", None)  # ptsl.cli.whole and real
        number = isinstance(action.default, (int, float)) and not isinstance(action.default, bool)
        if outside is not None or action.type in (int, float) or (action.type is None and number
                                                                   and action.nargs != 0):
            out.append({"path": list(path), "option": (action.option_strings or [action.dest])[0],
                        "positional": not action.option_strings, "outside": outside,
                        "type": getattr(action.type, "__name__", type(action.type).__name__)})
    return out
answers = []
for job in json.loads(sys.stdin.read()):
    parsers.clear()
    command, folder = job["command"], job["folder"]
    os.makedirs(folder, exist_ok=True)
    for rel, text in job["files"].items():
        os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
        with open(os.path.join(folder, rel), "w") as f:
            f.write(text)
    os.chdir(folder)
    saved_env = dict(os.environ)
    os.environ.clear()
    os.environ.update(job["env"])
    out, err, code = io.StringIO(), io.StringIO(), 0
    module = command[2] if command[1:2] == ["-m"] else None
    sys.argv = [module or command[1], *job["args"]]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if module:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                sys.path.insert(0, os.path.dirname(os.path.abspath(command[1])))
                try:
                    runpy.run_path(command[1], run_name="__main__")
                finally:
                    sys.path.pop(0)
        except SystemExit as e:
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    os.environ.clear()
    os.environ.update(saved_env)
    numeric = numeric_arguments(parsers[0]) if job["describe"] and parsers else None
    answers.append([code, out.getvalue(), err.getvalue(), numeric])
sys.stdout.write(json.dumps(answers))
"""


@dataclass(frozen=True)
class Job:
    """One command: ``[sys.executable, "-m", module]`` or ``[sys.executable, script]``, its
    arguments, files written into ``folder`` first (relative path -> text), and its whole
    environment; with ``describe``, its answer also describes its numeric arguments."""

    command: list[str]
    args: list[str]
    folder: Path
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)
    describe: bool = False


@dataclass(frozen=True)
class Answer:
    """What a command printed and its exit status; for a job with ``describe``, its numeric
    arguments (each ``{path, option, positional, outside, type}``: the sub-command names before
    it, its first option string or its name, whether it is positional, the value its range type
    refuses, None where it has none, and its type's name)."""

    returncode: int
    stdout: str
    stderr: str
    numeric: list[dict] | None = None


def run_in_one_process(jobs: list[Job], timeout: int = 600) -> list[Answer]:
    """Every job's answer, the jobs run one after another in one fresh Python process."""
    payload = json.dumps([{"command": j.command, "args": j.args, "files": j.files,
                           "folder": str(j.folder), "env": j.env, "describe": j.describe}
                          for j in jobs])
    proc = subprocess.run([sys.executable, "-c", DRIVER], input=payload, capture_output=True,
                          text=True, timeout=timeout, cwd=jobs[0].folder.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [Answer(*a) for a in json.loads(proc.stdout)]


def run_alone(job: Job, timeout: int = 300) -> Answer:
    """The job's answer from a process of its own, for the checks that the shared process is
    faithful."""
    job.folder.mkdir(parents=True, exist_ok=True)
    for rel, text in job.files.items():
        (job.folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (job.folder / rel).write_text(text)
    proc = subprocess.run(job.command + job.args, cwd=job.folder, env=job.env,
                          capture_output=True, text=True, timeout=timeout)
    return Answer(proc.returncode, proc.stdout, proc.stderr)
