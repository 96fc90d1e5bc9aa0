"""What computes a result: the configuration of one run, the benchmarks' facts, environments,
the agent (``agent/``: the agent and its one update, its replay buffer, optimiser, each method's
builder and the networks, ``agent/nets/``, one file per architecture), the method registry, the
training and evaluation loops, the measurement of a trained PTSL agent's task branches and its
records, the static update a CUDA graph captures (``cuda/``), the run records, saving and
loading, the runtime (device, threads, graph, vector envs) and the errors a run reports.

A training or evaluation stage's cache key is this folder (with its script, data, params and the
pins of the packages that compute): editing anything outside it re-runs no training. So it
imports nothing from the rest of the package (``ptsl.ops``, ``ptsl.report``, ``ptsl.tools``,
``ptsl.api``) and no MLflow, DVC, Ray or matplotlib; it reports progress through
:class:`ptsl.core.log.RunLog`, which the tracking layer implements.
"""
