"""Worker processes that each report one figure, started together and waited on together. The
wait polls the processes as well as the queue, so a worker that dies (a CUDA error, a client
that MPS refuses, a signal) is named with its exit code at once instead of after a long timeout,
and the whole wait is bounded; the other workers are then stopped."""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import time
from collections.abc import Callable
from typing import Any

#: Fresh interpreters: a forked CUDA context is unusable, and the workers must not inherit one.
SPAWN = mp.get_context("spawn")
#: How often the wait looks at the processes while the queue is empty.
POLL_S = 0.2
#: How long a dead worker's last message may take to arrive through the queue's pipe.
DRAIN_S = 1.0
#: How long a worker that reported an error may take to exit (its interpreter's teardown).
EXIT_S = 15.0


class WorkerFailed(RuntimeError):
    """A worker raised, exited without reporting, or did not report in time; the message names
    the worker (``worker 2 of 4``) and its exit code or the time waited."""


def _report(target: Callable[..., Any], index: int, out: Any, args: tuple,
            with_index: bool = False) -> None:
    try:
        value = target(index, *args) if with_index else target(*args)
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0][:300]  # the traceback is on its stderr
        out.put((index, None, f"{type(exc).__name__}: {first}"))
        raise  # the traceback goes to the worker's stderr; it exits with code 1
    out.put((index, value, None))


def run_workers(target: Callable[..., Any], args: tuple, n: int, timeout: float,
                with_index: bool = False, children: bool = False) -> list[Any]:
    """Run ``target(*args)`` (``with_index``: ``target(i, *args)``, ``i`` the worker's index
    from 0) in ``n`` spawned processes and return their values (in worker order); a
    :class:`WorkerFailed` as soon as one fails, or when not all have reported within
    ``timeout`` seconds. ``target`` must be importable (a module-level function).

    ``children``: the workers may start processes of their own (a training run's environment
    workers under ``PTSL_VECTOR=async``), which a daemonic process may not; they are stopped
    here all the same when the wait ends, however it ends."""
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=_report, args=(target, i, out, args, with_index),
                           daemon=not children) for i in range(n)]
    for p in procs:
        p.start()
    try:
        return _gather(procs, out, timeout)
    finally:
        _stop(procs)
        out.close()


def _gather(procs: list[Any], out: Any, timeout: float) -> list[Any]:
    n = len(procs)
    deadline = time.monotonic() + timeout
    values: dict[int, Any] = {}
    while len(values) < n:
        message = _next(out, POLL_S)
        if message is None:
            dead = [i for i, p in enumerate(procs) if i not in values and p.exitcode is not None]
            if dead:
                # What a worker put just before it exited may still be in the pipe.
                message = _next(out, DRAIN_S)
                if message is None:
                    i = dead[0]
                    raise WorkerFailed(f"worker {i + 1} of {n} {_exit(procs[i].exitcode)} "
                                       "without reporting")
            elif time.monotonic() > deadline:
                late = ", ".join(str(i + 1) for i in range(n) if i not in values)
                raise WorkerFailed(f"worker(s) {late} of {n} did not report within "
                                   f"{timeout:.0f} s (stopped)")
            else:
                continue
        index, value, error = message
        if error is not None:
            procs[index].join(EXIT_S)  # for its exit code
            raise WorkerFailed(f"worker {index + 1} of {n} failed: {error} "
                               f"({_exit(procs[index].exitcode)})")
        values[index] = value
    return [values[i] for i in range(n)]


def _next(out: Any, wait: float) -> tuple[int, Any, str | None] | None:
    try:
        return out.get(timeout=wait)
    except queue.Empty:
        return None


def _exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _stop(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5.0)
        if p.is_alive():
            p.kill()
            p.join()
