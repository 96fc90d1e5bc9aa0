"""The budget switch: ``python -m ptsl.ops.budget paper`` (or ``small``) writes a preset from
the ``budgets:`` section into the active keys of params.yaml, keeping its comments.

Stages read the active keys (``train.*``, ``sac.batch_size``, ``sac.init_steps``, ``seeds``,
``long_seeds``), so DVC sees exactly what changed; the presets themselves are read by no stage.
"""

from __future__ import annotations

from pathlib import Path

from .presets import main, switch as _switch
from .stage import run_stage


def switch(path: Path, name: str) -> dict:
    """Apply budget ``name`` to the params file at ``path``; returns the applied preset."""
    return _switch(path, "budgets", name)


if __name__ == "__main__":
    run_stage(lambda: main("budgets", __doc__))
