"""The protocol switch: ``python -m ptsl.ops.protocol metaworld-plus`` (or ``reference``) writes
a preset from the ``protocols:`` section into the active keys of params.yaml (``env.*``,
``train.eval_episodes``, ``train.eval_stride``, ``evaluate.episodes``), keeping its comments,
and names it in ``protocol:``. The ``validate`` stage checks that those keys are the named
protocol's (``protocol: custom`` for a protocol of your own); the reports show a published
number beside ours only where it was measured under the active protocol.
"""

from __future__ import annotations

from pathlib import Path

from .presets import main, switch as _switch
from .stage import run_stage


def switch(path: Path, name: str) -> dict:
    """Apply protocol ``name`` to the params file at ``path``; returns the applied preset."""
    return _switch(path, "protocols", name)


if __name__ == "__main__":
    run_stage(lambda: main("protocols", __doc__))
