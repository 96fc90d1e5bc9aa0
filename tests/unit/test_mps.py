"""The grid's MPS daemon: started or reused on its own pipe directory, quit only when the grid
started it, and handed to every stage (:mod:`ptsl.ops.mps`, ``--mps`` in :mod:`ptsl.ops.grid`).

A stand-in for ``nvidia-cuda-mps-control`` (``PTSL_MPS_CONTROL``) keeps its "daemon" as a file
in the pipe directory it is given and records every call with the environment it saw.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ptsl.ops import grid, mps
from ptsl.ops.mps import LOG_ENV, PIPE_ENV, MpsDaemon, MpsError

# The stand-in, as NVIDIA's front end behaves: `-d` starts the daemon (and fails when one runs),
# a command on stdin exits 0 only when a daemon answers, `quit` stops it. `FAIL_START` in its
# environment makes `-d` fail the way a broken driver install does.
STANDIN = '''#!{python}
import json, os, sys
from pathlib import Path

args = sys.argv[1:]
stdin = "" if args else sys.stdin.read()
pipe = Path(os.environ["{pipe_env}"])
log_dir = os.environ.get("{log_env}", "")
with open({calls!r}, "a") as f:
    f.write(json.dumps(dict(args=args, stdin=stdin.split(), pipe=str(pipe), log_dir=log_dir,
                            log_dir_writable=bool(log_dir) and os.access(log_dir, os.W_OK),
                            cuda_visible=os.environ.get("CUDA_VISIBLE_DEVICES"))) + "\\n")
daemon = pipe / "standin-daemon"
if args == ["-d"]:
    if os.environ.get("FAIL_START"):
        print("MPS control daemon could not start: no CUDA driver", file=sys.stderr)
        sys.exit(1)
    if daemon.exists():
        print("An instance of this daemon is already running", file=sys.stderr)
        sys.exit(1)
    Path(log_dir, "control.log").write_text("started\\n")
    daemon.write_text("running")
    sys.exit(0)
if not daemon.exists():
    print("Cannot find MPS control daemon process", file=sys.stderr)
    sys.exit(1)
for command in stdin.split():
    if command == "quit":
        daemon.unlink()
'''


@pytest.fixture
def standin(tmp_path, monkeypatch) -> Path:
    """The stand-in control program, named by PTSL_MPS_CONTROL; its calls go to calls.jsonl."""
    program = tmp_path / "fake-mps-control"
    program.write_text(STANDIN.format(python=sys.executable, pipe_env=PIPE_ENV, log_env=LOG_ENV,
                                      calls=str(tmp_path / "calls.jsonl")))
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(mps.PROGRAM_ENV, str(program))
    monkeypatch.delenv("FAIL_START", raising=False)
    return program


def calls(tmp_path: Path) -> list[dict]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def daemon_at(tmp_path: Path, program: Path) -> MpsDaemon:
    return MpsDaemon(str(program), tmp_path / "pipe", tmp_path / "scratch" / "mps-log")


def start_outside(d: MpsDaemon) -> None:
    """A daemon someone else started on the same pipe directory."""
    d.pipe_dir.mkdir(parents=True, exist_ok=True)
    d.log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **d.env()}
    subprocess.run([d.program, "-d"], env=env, check=True, stdin=subprocess.DEVNULL)


def test_starts_a_daemon_when_none_answers(tmp_path, standin, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    d = daemon_at(tmp_path, standin)
    d.start()
    assert d.owned
    seen = calls(tmp_path)
    assert [c["args"] or c["stdin"] for c in seen[:2]] == [["get_server_list"], ["-d"]]
    launch = seen[1]
    assert launch["pipe"] == str(d.pipe_dir)
    assert launch["log_dir"] == str(d.log_dir) and launch["log_dir_writable"]
    # Ray's clients name physical devices: the daemon must see them all, not a renumbered few.
    assert launch["cuda_visible"] is None
    assert (d.log_dir / "control.log").is_file()
    assert stat.S_IMODE(d.pipe_dir.stat().st_mode) == 0o700
    out = capsys.readouterr().out
    assert "started" in out and str(d.pipe_dir) in out


def test_reuses_a_daemon_that_answers_and_never_quits_it(tmp_path, standin, capsys):
    d = daemon_at(tmp_path, standin)
    start_outside(d)
    before = len(calls(tmp_path))
    d.start()
    d.stop()
    assert not d.owned
    mine = calls(tmp_path)[before:]
    assert mine and all(c["args"] == [] for c in mine)  # no `-d`
    assert all("quit" not in c["stdin"] for c in mine)
    assert (d.pipe_dir / "standin-daemon").exists()  # still running for its owner
    out = capsys.readouterr().out
    assert "reusing" in out and str(d.pipe_dir) in out


def test_quits_only_the_daemon_it_started_and_only_once(tmp_path, standin):
    d = daemon_at(tmp_path, standin)
    d.start()
    d.stop()
    seen = calls(tmp_path)
    assert seen[-1]["stdin"] == ["quit"] and seen[-1]["pipe"] == str(d.pipe_dir)
    assert not (d.pipe_dir / "standin-daemon").exists()
    assert not d.owned
    d.stop()
    assert len(calls(tmp_path)) == len(seen)


def test_a_failed_start_is_one_line_with_the_cause(tmp_path, standin, monkeypatch):
    monkeypatch.setenv("FAIL_START", "1")
    d = daemon_at(tmp_path, standin)
    with pytest.raises(MpsError, match=r"-d failed \(exit 1\): MPS control daemon could not "
                                       r"start: no CUDA driver; its logs: "):
        d.start()
    assert not d.owned


def test_a_missing_program_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(mps.PROGRAM_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-cuda-mps-control
    monkeypatch.delenv("PTSL_DEVICE", raising=False)
    expected = ("--mps needs NVIDIA's nvidia-cuda-mps-control (part of the CUDA driver "
                "utilities) on PATH")
    with pytest.raises(MpsError) as err:
        mps.control_program()
    assert str(err.value) == expected
    # Through the grid's command: the first thing it checks, before the project (no dvc.yaml
    # here), one line, a non-zero exit.
    monkeypatch.chdir(tmp_path)
    assert grid.main(["--mps"]) == 2
    assert capsys.readouterr().err == f"error: {expected}\n"


def test_the_program_override_must_be_executable(tmp_path, monkeypatch):
    monkeypatch.setenv(mps.PROGRAM_ENV, str(tmp_path / "absent"))
    with pytest.raises(MpsError, match=r"^PTSL_MPS_CONTROL=.*absent: not an executable file$"):
        mps.control_program()


def test_pipe_dir_is_short_node_local_and_per_user():
    pipe = mps.default_pipe_dir()
    assert pipe.parent == Path("/tmp") and pipe.name == f"ptsl-mps-{os.getuid()}"


@pytest.mark.parametrize("argv, says", [
    (["--mps", "--address", "auto"], "MPS is per node"),
    (["--mps", "--gpus-per-run", "0"], "MPS shares a GPU among runs"),
])
def test_grid_refuses_mps_where_it_cannot_work(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        grid.parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--mps" in err and says in err


def test_grid_refuses_mps_when_stages_run_on_the_cpu(monkeypatch, standin):
    monkeypatch.setenv("PTSL_DEVICE", "cpu")
    with pytest.raises(grid.GridError, match="PTSL_DEVICE=cpu"):
        grid.mps_daemon(Path.cwd())


def test_mps_share_of_a_gpu():
    with pytest.raises(grid.GridError, match="no GPU"):
        grid.mps_gpus_per_run(0, 0.0, given=False)
    assert grid.mps_gpus_per_run(1, 1 / 16, given=False) == 1 / 16
    # More runs per GPU than MPS serves: the default is raised, a given share refused.
    assert grid.mps_gpus_per_run(1, 1 / 64, given=False) == grid.MPS_MIN_SHARE
    assert grid.MPS_MIN_SHARE * grid.MPS_MAX_CLIENTS > 1 >= grid.MPS_MIN_SHARE * 47
    with pytest.raises(grid.GridError, match="more than 48 runs"):
        grid.mps_gpus_per_run(1, 1 / 64, given=True)


def test_stage_environments_carry_the_pipe_and_log_directories(tmp_path, standin):
    d = grid.mps_daemon(tmp_path)
    env = grid._worker_env(grid.Resources(cpus=1, gpus=0.125), None, d)
    assert env[PIPE_ENV] == str(mps.default_pipe_dir())
    assert env[LOG_ENV] == str((tmp_path / grid.SCRATCH / "grid" / "mps-log").resolve())
    assert env["PTSL_THREADS"] == "1"
    plain = grid._worker_env(grid.Resources(cpus=1, gpus=0.125), None)
    assert PIPE_ENV not in plain and LOG_ENV not in plain


def test_grid_starts_the_daemon_before_ray_and_quits_it_after(tmp_path, standin, monkeypatch):
    """``run()`` with Ray and DVC replaced by recorders: the daemon answers before Ray starts,
    every stage job carries its variables, and it is quit after ``ray.shutdown()``."""
    pipe = tmp_path / "pipe"
    monkeypatch.setattr(mps, "default_pipe_dir", lambda: pipe)
    monkeypatch.delenv("PTSL_DEVICE", raising=False)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    events: list[str] = []
    jobs: list = []

    def running() -> bool:
        return (pipe / "standin-daemon").exists()

    class Ray:
        def cluster_resources(self):
            return {"CPU": 2.0, "GPU": 1.0}

        def shutdown(self):
            events.append(f"ray.shutdown (daemon running: {running()})")

    def init_ray(args):
        events.append(f"ray.init (daemon running: {running()})")
        return Ray()

    def fan_out(stage_jobs, res, retries, ray, *lists_and_cache):
        jobs.extend(stage_jobs)
        events.append(f"fan_out ({res.gpus:g} GPU per run)")
        return []

    replaced = {"validate_project": lambda root: SimpleNamespace(experiments={}),
                "stale_training_stages": lambda root: (["train@x-1"], []),
                "pipeline_stages": lambda root: ["train@x-1", "evaluate@x-1"],
                "uncommitted_inputs": lambda root: [], "checkout": lambda root: (root, ""),
                "prepare_store": lambda groups, root: None, "_init_ray": init_ray,
                "head_commit": lambda root: "0" * 40, "cache_dir": lambda root: "/c",
                "fan_out": fan_out, "fan_in": lambda *a: 0}
    for name, value in replaced.items():
        monkeypatch.setattr(grid, name, value)
    assert grid.run(grid.parse_args(["--mps"]), tmp_path) == 0
    assert events == ["ray.init (daemon running: True)", "fan_out (0.5 GPU per run)",
                      "ray.shutdown (daemon running: True)"]
    assert not running()
    assert calls(tmp_path)[-1]["stdin"] == ["quit"]
    assert jobs[0].then == ("evaluate@x-1",)
    assert jobs[0].env[PIPE_ENV] == str(pipe)
    assert jobs[0].env[LOG_ENV] == str((tmp_path / grid.SCRATCH / "grid" / "mps-log").resolve())
