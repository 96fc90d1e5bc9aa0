"""NVIDIA MPS for the grid: one control daemon per node and user, started or reused.

Under MPS (NVIDIA's Multi-Process Service) the CUDA kernels of several processes run on one GPU
at once instead of taking turns. A CUDA process becomes an MPS client when, at CUDA's start, it
reaches a control daemon through the pipe directory ``CUDA_MPS_PIPE_DIRECTORY`` names; a process
that reaches none runs without MPS and says nothing. So the grid starts the daemon before any
stage process starts and hands every stage the same two variables (:meth:`MpsDaemon.env`).

The pipe directory is the grid's own (``/tmp/ptsl-mps-<uid>``, :func:`default_pipe_dir`), so the
grid never attaches to or quits a daemon another user or the system runs. A daemon already
answering there is reused and left running; one the grid started is quit at its end
(:meth:`MpsDaemon.stop`). ``PTSL_MPS_CONTROL`` names another control program than
``nvidia-cuda-mps-control`` on PATH (the tests' stand-in).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PROGRAM = "nvidia-cuda-mps-control"
PROGRAM_ENV = "PTSL_MPS_CONTROL"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
PROBE_TIMEOUT_S = 30.0
# `quit` lets the daemon's current clients finish first; the grid quits after they have exited.
QUIT_TIMEOUT_S = 120.0
# `-d` returns before the daemon listens: how long to wait for it to answer.
START_WAIT_S = 10.0


class MpsError(RuntimeError):
    """MPS cannot be set up or stopped; the message says why and what to do."""


def control_program(environ: dict[str, str] | None = None) -> str:
    """The control program: ``PTSL_MPS_CONTROL`` when set, else ``nvidia-cuda-mps-control`` on
    PATH; an MpsError when there is none."""
    environ = os.environ if environ is None else environ
    override = environ.get(PROGRAM_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise MpsError(f"{PROGRAM_ENV}={override}: not an executable file")
        return override
    found = shutil.which(PROGRAM, path=environ.get("PATH"))
    if not found:
        raise MpsError(f"--mps needs NVIDIA's {PROGRAM} (part of the CUDA driver utilities) "
                       "on PATH")
    return found


def default_pipe_dir() -> Path:
    """``/tmp/ptsl-mps-<uid>``: short (it holds Unix sockets, whose paths are limited to ~108
    bytes, so not under a long TMPDIR), node-local, and this user's own."""
    return Path("/tmp") / f"ptsl-mps-{os.getuid()}"


def _last_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else "no output"


@dataclass
class MpsDaemon:
    """The MPS control daemon on ``pipe_dir``; ``owned`` once this process started it."""

    program: str
    pipe_dir: Path
    log_dir: Path
    owned: bool = False

    @classmethod
    def for_node(cls, log_dir: Path) -> MpsDaemon:
        """The daemon on this node's grid pipe directory, logging to ``log_dir`` (NVIDIA's
        default, /var/log/nvidia-mps, needs root); an MpsError when there is no control
        program."""
        return cls(control_program(), default_pipe_dir(), Path(log_dir).resolve())

    def env(self) -> dict[str, str]:
        """What the daemon and every client must see: the same pipe directory, and a writable
        log directory."""
        return {PIPE_ENV: str(self.pipe_dir), LOG_ENV: str(self.log_dir)}

    def _environ(self) -> dict[str, str]:
        env = {**os.environ, **self.env()}
        # Clients get CUDA_VISIBLE_DEVICES from Ray as physical indices; a daemon started with
        # it set would renumber the devices it serves, and those indices would name others.
        env.pop("CUDA_VISIBLE_DEVICES", None)
        return env

    def _control(self, command: str, timeout: float) -> subprocess.CompletedProcess:
        """Send one command to the daemon through the control program's front end."""
        try:
            # The exit status is the answer (0: a daemon answered), so no check=True.
            return subprocess.run([self.program], input=f"{command}\n", env=self._environ(),
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise MpsError(f"`echo {command} | {self.program}` did not answer in "
                           f"{timeout:.0f} s (pipe directory {self.pipe_dir})") from None

    def answers(self) -> bool:
        """Whether a daemon answers on the pipe directory (the front end exits 0 only then)."""
        return self._control("get_server_list", PROBE_TIMEOUT_S).returncode == 0

    def _prepare_dirs(self) -> None:
        self.pipe_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # /tmp is shared: a directory another user made there could host their daemon.
        if self.pipe_dir.stat().st_uid != os.getuid():
            raise MpsError(f"MPS pipe directory {self.pipe_dir} belongs to another user; "
                           "remove it or ask its owner to")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(self.log_dir, os.W_OK):
            raise MpsError(f"MPS log directory {self.log_dir} is not writable")

    def _launch(self) -> subprocess.CompletedProcess:
        # Output to a file, not a pipe: the daemon forks and may keep the parent's stdout open,
        # and reading a pipe until EOF would then wait for the daemon to exit.
        with tempfile.TemporaryFile("w+") as out:
            try:
                proc = subprocess.run([self.program, "-d"], env=self._environ(),
                                      stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=PROBE_TIMEOUT_S,
                                      check=False)
            except subprocess.TimeoutExpired:
                raise MpsError(f"{self.program} -d did not return in {PROBE_TIMEOUT_S:.0f} s "
                               f"(pipe directory {self.pipe_dir})") from None
            out.seek(0)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), "")

    def start(self) -> None:
        """Reuse the daemon answering on the pipe directory, else start one and own it; print
        one line saying which. Call it before any process that may use CUDA starts."""
        self._prepare_dirs()
        if self.answers():
            print(f"grid: MPS: reusing the control daemon already on {self.pipe_dir} (left "
                  "running after the grid)", flush=True)
            return
        proc = self._launch()
        if proc.returncode != 0:
            if self.answers():  # another grid started it between the probe and `-d`
                print(f"grid: MPS: reusing the control daemon just started on {self.pipe_dir} "
                      "(left running after the grid)", flush=True)
                return
            raise MpsError(f"{self.program} -d failed (exit {proc.returncode}): "
                           f"{_last_line(proc.stdout)}; its logs: {self.log_dir}")
        deadline = time.monotonic() + START_WAIT_S
        while not self.answers():
            if time.monotonic() > deadline:
                raise MpsError(f"{self.program} -d exited 0 but no daemon answers on "
                               f"{self.pipe_dir} after {START_WAIT_S:.0f} s; its logs: "
                               f"{self.log_dir}")
            time.sleep(0.1)
        self.owned = True
        print(f"grid: MPS: started the control daemon on {self.pipe_dir} (logs in "
              f"{self.log_dir}); the grid quits it when it ends", flush=True)

    def stop(self) -> None:
        """Quit the daemon if this process started it (never one it reused). Call it once the
        clients have exited: ``quit`` lets current clients finish first."""
        if not self.owned:
            return
        proc = self._control("quit", QUIT_TIMEOUT_S)
        if proc.returncode != 0:
            raise MpsError(f"quitting the MPS control daemon on {self.pipe_dir} failed (exit "
                           f"{proc.returncode}): {_last_line(proc.stderr or proc.stdout)}; stop "
                           f"it with `echo quit | {PIPE_ENV}={self.pipe_dir} {self.program}`")
        self.owned = False
        print(f"grid: MPS: quit the control daemon on {self.pipe_dir}", flush=True)
