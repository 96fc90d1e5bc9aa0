"""What the grid's ``--address`` needs before it starts: a Ray cluster that answers, and a DVC
remote that every node of it reaches.

Ray's own ``ray.init(address=...)`` waits for a cluster that does not answer for as long as it is
left running (over five minutes seen here, with a warning every few seconds and no error), so the
grid first opens a TCP connection to the address Ray would connect to (:func:`probe_cluster`,
seconds) and bounds ``ray.init`` itself (:func:`bounded`): an address with something else behind
it passes the probe and would hang there too.

On a cluster the DVC default remote is the only thing the nodes share (each worker pushes its
run there, the head pulls them all): a remote that is a folder on this machine's own disk would
let every worker train and then lose its run. :func:`check_remote` refuses it, warns when the
folder is on a network filesystem (which may be mounted on every node, at the same path), and
takes the user's word for it with ``--remote-is-shared``.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: How long the TCP probe of ``--address`` waits at most (a host that drops packets never
#: refuses; one on the same network answers in milliseconds).
PROBE_TIMEOUT_S = 10.0
#: ``ray.init`` on a cluster, at most (``--connect-timeout``): it returns in a few seconds.
CONNECT_TIMEOUT_S = 30.0
#: Filesystems whose folders other machines can mount (Linux ``/proc/mounts`` type names).
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "glusterfs",
    "fuse.glusterfs", "ceph", "fuse.ceph", "fuse.cephfs", "cephfs", "fuse.sshfs", "9p", "afs",
    "ocfs2", "gfs2", "panfs", "wekafs", "fuse.juicefs", "fuse.s3fs", "fuse.gcsfuse",
    "fuse.rclone", "virtiofs"})
SHARED_FLAG = "--remote-is-shared"
HOW_TO_START = ("start one (`ray start --head --port 6379` on the head, `ray start --address "
                "<head>:6379` on each node) and pass the head's address, or leave --address out "
                "to run on this machine")


class ClusterError(RuntimeError):
    """``--address`` cannot work as given; the message is one line saying why and what to do."""


def endpoint(address: str) -> tuple[str, int] | None:
    """The ``(host, port)`` that ``--address`` names: ``HOST:PORT`` (a head's GCS) or
    ``ray://HOST:PORT`` (Ray Client); None for ``auto`` and ``local``, which Ray resolves on
    this machine. Anything else is a :class:`ClusterError`."""
    if address in ("auto", "local"):
        return None
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"--address {address!r}: expected HOST:PORT (the head's `ray start "
                           "--head --port`), ray://HOST:PORT (Ray Client) or auto")
    return host, int(port)


def _ray_host(address: str, host: str) -> str:
    """The host Ray connects to for ``address``: for a GCS address it replaces a loopback name
    by this node's IP (``ray._private.services.resolve_ip_for_localhost``), so that is what to
    probe; Ray Client connects to the host as given."""
    if address.startswith("ray://"):
        return host
    try:
        from ray._private.services import resolve_ip_for_localhost
    except ImportError:  # a Ray without it: probe what was given
        return host
    try:
        return resolve_ip_for_localhost(host)
    except Exception:  # noqa: BLE001 - Ray's lookup of this node's IP; the probe says the rest
        return host


def _connect(host: str, port: int, timeout: float) -> str:
    """"" when a TCP connection to ``host:port`` opens within ``timeout``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except socket.gaierror as exc:
        return f"host {host!r} not found: {exc.strerror or exc}"
    except (socket.timeout, TimeoutError):
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def probe_cluster(address: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """A :class:`ClusterError` naming ``address`` when nothing answers at the host and port Ray
    would connect to, within about ``timeout`` seconds (the name lookup included, which has no
    timeout of its own: it runs in a thread that is not waited for beyond it)."""
    where = endpoint(address)
    if where is None:
        return
    host, port = where
    target = _ray_host(address, host)
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(_connect(target, port, timeout)),
                              daemon=True)
    worker.start()
    worker.join(timeout + 1.0)
    why = result[0] if result else f"no answer within {timeout:g} s"
    if why:
        seen = f" (Ray connects to {target}:{port})" if target != host else ""
        raise ClusterError(f"--address {address}{seen}: no Ray cluster answers there ({why}); "
                           + HOW_TO_START)


def bounded(call: Callable[[], Any], seconds: float, message: str) -> Any:
    """``call()``, or, when it has not returned after ``seconds``, ``error: <message>`` on
    stderr and exit status 2 at once. For ``ray.init`` on a cluster: it waits in Ray's C++ code,
    where no Python signal or exception reaches it, so the process ends from a timer thread
    (``os._exit``: nothing of the grid has started yet, there is nothing to clean up)."""

    def give_up() -> None:
        print(f"error: {message}", file=sys.stderr, flush=True)
        os._exit(2)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        return call()
    finally:
        timer.cancel()


@dataclass(frozen=True)
class Remote:
    """A DVC remote as ``dvc remote list`` shows it (a folder's path resolved)."""

    name: str
    url: str
    default: bool = False

    @property
    def folder(self) -> Path | None:
        """The folder a path or ``file://`` remote names; None for any other scheme."""
        if self.url.startswith("file://"):
            return Path(self.url[len("file://"):])
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", self.url):
            return None
        return Path(self.url)


def dvc_remotes(folder: Path) -> list[Remote]:
    """The DVC remotes of the project that holds ``folder``, as DVC's own config reader gives
    them (every config level merged, a folder's path made absolute); ``dvc remote list`` would
    wrap a long path onto a second line."""
    from dvc.config import Config

    top = Path(folder).resolve()
    while not (top / ".dvc").is_dir() and top != top.parent:
        top = top.parent
    config = Config(dvc_dir=str(top / ".dvc"))
    default = config.get("core", {}).get("remote")
    return [Remote(name, str(conf.get("url", "")), name == default)
            for name, conf in config.get("remote", {}).items()]


def _unescape(field: str) -> str:
    """A /proc/mounts path field: spaces, tabs, newlines and backslashes are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem that holds ``path`` (existing or not), from
    ``/proc/mounts`` (or the text ``mounts``); None where that cannot be read (not Linux)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    # realpath follows the links of what exists and keeps the rest (a remote not created yet).
    path = Path(os.path.realpath(path))
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape(fields[1])
        inside = path == Path(point) or Path(point) in path.parents
        if inside and len(point) >= len(best):  # the last mount on a point is the visible one
            best, kind = point, fields[2]
    return kind


def check_remote(remotes: Sequence[Remote], shared: bool,
                 mounts: str | None = None) -> str | None:
    """Whether the DVC default remote among ``remotes`` can be a cluster's shared cache: a
    :class:`ClusterError` when there is none, or when it is a folder on this machine's own disk
    and ``shared`` (``--remote-is-shared``) is not given; a one-line warning to print when it is
    a folder taken as shared (on a network filesystem, or with ``shared``); None for a remote
    that is no folder (s3://, ssh://, ...)."""
    default = next((r for r in remotes if r.default), None)
    add = ("`dvc remote add -d shared s3://<bucket>/ptsl` (or gs://..., ssh://<host>/<path>), "
           "committed or in .dvc/config.local on every node")
    if default is None:
        raise ClusterError(f"--address needs a DVC default remote as the cluster's shared cache "
                           f"(workers push their runs there, the head pulls them): {add}")
    folder = default.folder
    if folder is None:
        return None
    kind = filesystem_type(folder, mounts)
    what = f"the DVC default remote {default.name!r} is the folder {folder}"
    if kind in NETWORK_FILESYSTEMS:
        return (f"warning: --address: {what}, on a network filesystem ({kind}): every node must "
                "mount it at this path, or the workers' runs never reach the head")
    if shared:
        return (f"warning: --address: {what} on {kind or 'a filesystem of unknown type'}, taken "
                f"as mounted at this path on every node ({SHARED_FLAG})")
    raise ClusterError(f"--address: {what} on this machine's disk ({kind or 'type unknown'}), "
                       "which the other nodes do not see: workers would push their runs where "
                       f"the head never finds them. Add a remote every node reaches: {add}; for "
                       f"a folder every node mounts at this path, pass {SHARED_FLAG}")
