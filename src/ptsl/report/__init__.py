"""Records -> what a reader opens: the paper's tables with IQM and bootstrap confidence
intervals, curves and per-task heatmaps, rollout contact sheets, DVC plot data and metrics, and
the README's results block (the aggregate stage).

It may import :mod:`ptsl.core` (the records and their readers), :mod:`ptsl.ops.params` (the
tables the params file defines) and the commands' parser :mod:`ptsl.cli`; the aggregate stage
depends on the first two and on this folder.
"""
