"""The grid's --address before anything runs: an address where no Ray cluster answers, or one
where something else does, is one line within seconds and changes no file; a DVC remote that
only this machine sees is refused for a cluster (docs/scaling.md#on-a-cluster).

No Ray cluster is started or joined here: the addresses are a closed port and a plain TCP
listener of the test's own."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ptsl.ops import cluster
from ptsl.ops.cluster import ClusterError, Remote

from ..pipeline_project import dvc, env_for, make_project

TINY = {"tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 32,
                       "num_layers": 2, "label": "Tiny MT-SAC"}}
MOUNTS = ("/dev/vda / ext4 rw,relatime 0 0\n"
          "head:/export/dvc /mnt/shared\\040dvc nfs4 rw,relatime 0 0\n"
          "tmpfs /mnt/shared\\040dvc/tmp tmpfs rw 0 0\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A tiny committed project whose default DVC remote is a folder on this machine's disk."""
    root = make_project(tmp_path_factory.mktemp("address"), TINY, seeds=[1], git=True)
    dvc(root, "remote", "add", "-d", "store", str(root.parent / "remote"))
    subprocess.run(["git", "commit", "-qam", "remote"], cwd=root, check=True,
                   capture_output=True)
    return root


@pytest.fixture
def mute_listener():
    """A TCP port on every interface that accepts connections and never says anything (no Ray
    there): the probe passes, Ray's handshake would wait for ever. Yields its port."""
    server = socket.create_server(("", 0))
    conns: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conns.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in conns:
        conn.close()


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the project with its SHA-256 (ignored ones too: mlflow.db, .scratch/,
    dvc.lock), outside .git and DVC's own lock files (.dvc/tmp: `dvc status` takes its lock)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[:1] != (".git",)
            and p.relative_to(root).parts[:2] != (".dvc", "tmp")}


def grid(root: Path, *args: str, timeout: int = 120) -> tuple[subprocess.CompletedProcess, float]:
    env = env_for(root)
    env.pop("RAY_ADDRESS", None)  # never the machine's own Ray
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ptsl.ops.grid", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.perf_counter() - t0


def test_an_address_where_nothing_listens_is_one_line_at_once_and_changes_nothing(project):
    before = snapshot(project)
    address = f"127.0.0.1:{closed_port()}"
    proc, seconds = grid(project, "--address", address)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --address {address}"), proc.stderr
    assert "no Ray cluster answers there (connection refused)" in lines[0]
    assert "ray start --head" in lines[0]
    assert seconds < 30
    assert snapshot(project) == before


def test_an_address_that_answers_without_ray_gives_up_after_the_connect_timeout(
        project, mute_listener):
    """What passes the probe but is no Ray head (a dashboard's port, say): ray.init would wait
    for ever; the grid ends it after --connect-timeout, in one line, before it changed a file."""
    before = snapshot(project)
    proc, seconds = grid(project, "--address", f"127.0.0.1:{mute_listener}",
                         "--remote-is-shared", "--connect-timeout", "3")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: --address 127.0.0.1:{mute_listener}: Ray did not connect within "
                      "3 s (--connect-timeout); is it a Ray head's address (`ray start --head` "
                      "prints it)? Nothing was changed"], proc.stderr
    assert seconds < 30
    assert snapshot(project) == before


def test_a_folder_remote_on_this_disk_is_refused_for_a_cluster(project, mute_listener):
    before = snapshot(project)
    proc, _ = grid(project, "--address", f"127.0.0.1:{mute_listener}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: --address: the DVC default remote 'store' is the folder "
                           f"{project.parent / 'remote'} on this machine's disk")
    assert "dvc remote add -d shared s3://" in line and "--remote-is-shared" in line
    assert snapshot(project) == before


def test_an_unknown_address_form_and_misused_flags_are_one_line():
    with pytest.raises(ClusterError, match=r"--address 'head': expected HOST:PORT"):
        cluster.endpoint("head")
    assert cluster.endpoint("ray://head:10001") == ("head", 10001)
    assert cluster.endpoint("[::1]:6379") == ("::1", 6379)
    assert cluster.endpoint("auto") is None
    # (--connect-timeout 0 is walked with every numeric argument: tests/e2e/test_entry_points.py)
    proc = subprocess.run([sys.executable, "-m", "ptsl.ops.grid", "--remote-is-shared"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--remote-is-shared: only with --address" in proc.stderr


def test_the_remotes_are_read_as_dvc_reads_them(project, tmp_path):
    """DVC's config reader, not `dvc remote list`, which wraps a long path onto a second line."""
    far = tmp_path / ("a-folder-whose-name-is-long-enough-to-wrap-dvc-remote-list" * 2)
    dvc(project, "remote", "add", "--local", "-d", "far", str(far))
    try:
        remotes = cluster.dvc_remotes(project / "data")
    finally:
        (project / ".dvc" / "config.local").unlink()
    assert remotes == [Remote("store", str(project.parent / "remote")),
                       Remote("far", str(far), True)]


def test_which_remotes_a_cluster_takes():

    def default(url: str) -> list[Remote]:
        return [Remote("r", url, True)]

    assert cluster.check_remote(default("s3://bucket/ptsl"), False, MOUNTS) is None
    assert cluster.check_remote(default("ssh://head/srv/dvc"), False, MOUNTS) is None
    for url in ("/work/remote", "file:///work/remote"):
        with pytest.raises(ClusterError, match=r"'r' is the folder /work/remote on this "
                                               r"machine's disk \(ext4\)"):
            cluster.check_remote(default(url), False, MOUNTS)
        assert "taken as mounted at this path on every node (--remote-is-shared)" in \
            cluster.check_remote(default(url), True, MOUNTS)
    # On a network filesystem (the last mount on the longest matching point decides): a warning.
    warning = cluster.check_remote(default("/mnt/shared dvc/remote"), False, MOUNTS)
    assert warning.startswith("warning: --address: the DVC default remote 'r' is the folder "
                              "/mnt/shared dvc/remote, on a network filesystem (nfs4)")
    with pytest.raises(ClusterError, match=r"\(tmpfs\)"):
        cluster.check_remote(default("/mnt/shared dvc/tmp/x"), False, MOUNTS)
    with pytest.raises(ClusterError, match="needs a DVC default remote"):
        cluster.check_remote([Remote("r", "s3://b")], False, MOUNTS)


def test_the_probe_bounds_a_host_that_never_answers(monkeypatch):
    """A host that drops packets: the probe gives up after its timeout, not Ray's minutes."""
    def silent(host, port, timeout):
        time.sleep(timeout + 5)
        return ""

    monkeypatch.setattr(cluster, "_connect", silent)
    t0 = time.perf_counter()
    with pytest.raises(ClusterError, match=r"--address ray://head:10001: no Ray cluster answers "
                                           r"there \(no answer within 0.5 s\)"):
        cluster.probe_cluster("ray://head:10001", timeout=0.5)
    assert time.perf_counter() - t0 < 3
