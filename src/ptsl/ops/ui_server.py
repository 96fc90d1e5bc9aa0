"""``mlflow ui`` on the project's store, started and watched for ``make ui``.

MLflow's UI (3.17) opens every page on its GenAI side (traces, an assistant) unless the
browser's toggle says otherwise or the page's address asks for the model-training side, and its
server prints only its own root address. So the command starts ``mlflow ui`` as a child process
(with this process's environment: its usage reporting off, :mod:`ptsl.ops.telemetry`), waits
until the server answers, and then, as its last line, prints the address that opens the newest
training runs on the model-training side. Ctrl-C (or SIGTERM) stops both. One worker process:
the UI has one reader, and MLflow's default four start one after another (on a busy 2-core
machine here 126 s before the first answer, against 51 s for one).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from ..core.errors import ConfigError

#: How long the server may take to answer (4 workers start one after another on a busy
#: 2-core machine: up to a minute here).
START_TIMEOUT_S = 300.0
WORKERS = 1


def port_free(host: str, port: int) -> bool:
    """Whether nothing listens on ``host:port`` yet."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex((host, port)) != 0


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - our own server
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def check_port(host: str, port: int) -> None:
    """One line (:class:`ConfigError`) when ``host:port`` is taken."""
    if not port_free(host, port):
        raise ConfigError(f"--port {port}: something already listens on {host}:{port} (another "
                          "MLflow UI?); stop it or pick another port (make ui UI_PORT=5001)")


def serve(uri: str, host: str, port: int, ready: Callable[[str], list[str]],
          timeout_s: float = START_TIMEOUT_S) -> int:
    """Serve the MLflow UI on store ``uri`` at ``host:port`` until the server exits, Ctrl-C or
    SIGTERM; once it answers, print the lines ``ready(base_url)`` gives. Returns the exit
    status (130 when stopped)."""
    check_port(host, port)
    base = f"http://{host}:{port}"
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
           "--host", host, "--port", str(port), "--workers", str(WORKERS)]
    proc = subprocess.Popen(cmd)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the server too
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(f"{base}/health"):
            if proc.poll() is not None:
                return proc.returncode
            if time.monotonic() > deadline:
                proc.terminate()
                proc.wait()
                raise ConfigError(f"mlflow ui on {base}: no answer after {timeout_s:.0f} s")
            time.sleep(0.5)
        print("\n".join(ready(base)), flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop(proc: subprocess.Popen) -> None:
    """End the server (a terminal's Ctrl-C reached it too; SIGTERM did not), killing it if it
    has not ended 30 s later."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
