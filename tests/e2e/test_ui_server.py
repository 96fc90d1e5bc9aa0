"""``make ui`` (``python -m ptsl.ops.mlflow_ui --serve``): the real ``mlflow ui`` on a project
store, started with MLflow's usage reporting off though the caller's environment did not say so,
the link to the newest training runs printed once it answers, and SIGTERM ending the server too;
a taken port refused in one line before anything is printed."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ptsl.ops.telemetry import OFF

from ..helpers import log_file, mlflow_client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ui(root: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in OFF and k != "MLFLOW_TRACKING_URI"}
    return subprocess.Popen([sys.executable, "-m", "ptsl.ops.mlflow_ui", "--serve", "--port",
                             str(port)], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def read_until(proc: subprocess.Popen, start: str, timeout: float) -> list[str]:
    """The lines ``proc`` prints (MLflow's own among them) up to the one after the first that
    begins with ``start``, waiting at most ``timeout`` seconds."""
    got: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [got.put(line) for line in proc.stdout], daemon=True).start()
    lines, deadline = [], time.monotonic() + timeout
    while len(lines) < 2 or not lines[-2].startswith(start):
        try:
            lines.append(got.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            raise AssertionError(f"after {timeout} s only {lines}") from None
    return lines


def environ(pid: int) -> dict[str, str]:
    """A running process's environment (Linux)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_the_ui_serves_the_store_and_ends_on_the_newest_runs(tmp_path, tracking_on):
    log_file(tmp_path, "a-1", "first")
    # A store made before the kind tag existed: make ui tags every project experiment.
    client = mlflow_client(tmp_path)
    client.delete_experiment_tag(client.get_experiment_by_name("train").experiment_id,
                                 "mlflow.experimentKind")
    client.create_experiment("mt10-cpu/aggregate")
    port = free_port()
    proc = ui(tmp_path, port)
    try:
        lines = read_until(proc, "MLflow UI at", timeout=300)  # once the server answers
        link = f"http://127.0.0.1:{port}/#/experiments/1/runs?workflowType=machine_learning"
        assert lines[0] == f"train: {link}&viewStateShareKey=compare (1 run)\n"
        assert lines[-2:] == [f"MLflow UI at http://127.0.0.1:{port} (Ctrl-C stops it); the "
                              "newest training runs, train, on its Model training side:\n",
                              f"  {link}&viewStateShareKey=compare\n"]
        kinds = {e.name: e.tags.get("mlflow.experimentKind")
                 for e in client.search_experiments()}
        assert kinds == {"Default": None, "train": "custom_model_development",
                         "mt10-cpu/aggregate": "custom_model_development"}
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1
        server = int(children[0])
        assert environ(server)["MLFLOW_DISABLE_TELEMETRY"] == "true"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        deadline = time.monotonic() + 30
        while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # reaped by its parent, which has exited: gone from /proc
        assert not Path(f"/proc/{server}").exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_taken_port_is_one_line_before_anything_else(tmp_path, tracking_on):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "ptsl.ops.mlflow_ui", "--serve", "--port",
                              str(port)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (f"error: --port {port}: something already listens on 127.0.0.1:{port} "
                          "(another MLflow UI?); stop it or pick another port (make ui "
                          "UI_PORT=5001)\n")
