"""Usage reporting off in every process the project starts.

The pipeline and its UI run offline on many machines (clusters, air-gapped boxes), and nothing
here needs a vendor to hear about it. MLflow reports usage unless ``MLFLOW_DISABLE_TELEMETRY``
is true, and decides once, when ``mlflow`` is first imported; Ray reports cluster usage unless
``RAY_USAGE_STATS_ENABLED`` is 0, read when it starts a cluster. DVC's own reporting is off in
``.dvc/config`` (``analytics = false``).

:func:`switch_off` runs when :mod:`ptsl.ops` is first imported: every command and stage script
that opens the MLflow store or starts Ray goes through :mod:`ptsl.ops` before it imports
either, and the processes they start (``dvc repro`` and its stages, Ray's workers) inherit the
setting. A value the user set stays (``MLFLOW_DISABLE_TELEMETRY=false`` turns MLflow's back on).
``make ui`` sets the same for ``mlflow ui``, which does not import the project.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: Each tool's own switch, and the value that turns its reporting off.
OFF = {"MLFLOW_DISABLE_TELEMETRY": "true", "RAY_USAGE_STATS_ENABLED": "0"}


def switch_off(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set each switch of :data:`OFF` that ``environ`` does not set already; returns those set."""
    added = {k: v for k, v in OFF.items() if k not in environ}
    environ.update(added)
    return added
