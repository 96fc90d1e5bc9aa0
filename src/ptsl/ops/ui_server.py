"""``mlflow ui`` on the project's store, started and watched for ``make ui``.

MLflow's UI (3.17) opens every page on its GenAI side (traces, an assistant) unless the
browser's toggle says otherwise or the page's address asks for the model-training side, and its
server prints only its own root address. So the command starts ``mlflow ui`` as a child process
(with this process's environment: its usage reporting off, :mod:`ptsl.ops.telemetry`), waits
until the server answers, and then, as its last line, prints the address that opens the newest
training runs on the model-training side. Ctrl-C stops both.
"""

from __future__ import annotations

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


def serve(uri: str, host: str, port: int, ready: Callable[[str], list[str]],
          timeout_s: float = START_TIMEOUT_S) -> int:
    """Serve the MLflow UI on store ``uri`` at ``host:port`` until the server exits or Ctrl-C;
    once it answers, print the lines ``ready(base_url)`` gives. Returns the exit status."""
    if not port_free(host, port):
        raise ConfigError(f"port {port}: something already listens on {host}:{port} (another "
                          "MLflow UI?); stop it or pick another port (make ui UI_PORT=5001)")
    base = f"http://{host}:{port}"
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
           "--host", host, "--port", str(port)]
    proc = subprocess.Popen(cmd)
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
    except KeyboardInterrupt:  # the terminal sent Ctrl-C to the server too
        _stop(proc)
        return 130


def _stop(proc: subprocess.Popen) -> None:
    """End the server: it exits on its own after Ctrl-C; terminate it if it has not."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait()
