"""What runs the pipeline: the params file and its validation, what the stage scripts share
(one-line errors), the machine check, tracking to MLflow and its UI notes, the grid and its
workspaces (Ray), the budget switch and the DVC experiments view.

It may import :mod:`ptsl.core` and the commands' parser :mod:`ptsl.cli`, never
:mod:`ptsl.report` or :mod:`ptsl.tools`. Nothing here
changes a number a stage writes, so no training stage depends on this folder: editing a note,
the grid or a view re-trains nothing.
"""

from .telemetry import switch_off

# Before any module here imports MLflow or Ray, which read their usage-reporting switches then.
switch_off()
