"""Records -> what a reader opens: the paper's tables with IQM and bootstrap confidence
intervals, curves and per-task heatmaps, rollout contact sheets, DVC plot data and metrics, and
the README's results block (the aggregate stage).

It may import :mod:`ptsl.core` (the records and their readers) and :mod:`ptsl.ops.params` (the
tables the params file defines); the aggregate stage depends on those and on this folder.
"""
