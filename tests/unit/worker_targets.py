"""Targets of the benchmark's worker tests: a spawned process imports this module, so it imports
nothing heavy (torch would add seconds to every worker's start)."""

from __future__ import annotations

import os
import sys
import time


def report_twice(x: int) -> int:
    """A worker that reports."""
    return 2 * x


def first_dies(claim: str, how: str) -> int:
    """The first worker to claim the file dies (``exit``: exit code 3; ``raise``: an error);
    the others wait, as sharing workers wait on their barrier for a dead one."""
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        time.sleep(600)
        return 0
    if how == "exit":
        sys.exit(3)
    raise ValueError("refused by the server")


def hang(x: int) -> int:
    """A worker that never reports."""
    time.sleep(600)
    return x


def _exit_now() -> None:
    pass


def start_a_child(x: int) -> int:
    """A worker that starts a process of its own (as a run with async environments does)."""
    import multiprocessing as mp

    child = mp.get_context("spawn").Process(target=_exit_now)
    child.start()
    child.join(60)
    return x + child.exitcode
