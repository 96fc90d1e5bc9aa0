"""Facts about the benchmarks, stated once: which tasks MT10 and MT50 hold (Meta-World's own
lists, in its order), the sizes every Meta-World v3 task shares, and the width of the
task-description embeddings CARE reads.

A benchmark is ``mt10``, ``mt50`` or the name of one Meta-World v3 task (``reach-v3``).
"""

from __future__ import annotations

#: Benchmarks of several tasks; any single Meta-World v3 task name is a benchmark too.
MULTI_TASK = ("mt10", "mt50")
#: Observation and action sizes of every Meta-World v3 task.
OBS_DIM = 39
ACTION_DIM = 4
#: Observation size under ``env.observation: v1`` (Meta-World v1's layout, reference 1.1).
V1_OBS_DIM = 12


def observation_dim(observation: str) -> int:
    """The observation size an ``env.observation`` value gives (``full`` or ``v1``)."""
    return V1_OBS_DIM if observation == "v1" else OBS_DIM
#: Width of the RoBERTa task-description vectors shipped with mtrl (CARE's task encoder input).
EMBEDDING_DIM = 768


def benchmark_tasks(benchmark: str) -> tuple[str, ...]:
    """Task names of ``benchmark`` in its order, without building it."""
    if benchmark in MULTI_TASK:
        from metaworld.env_dict import MT10_V3, MT50_V3  # loads MuJoCo's bindings only

        return tuple(MT10_V3 if benchmark == "mt10" else MT50_V3)
    return (benchmark,)


def num_tasks(benchmark: str) -> int:
    """Tasks in ``benchmark`` (10, 50 or 1), without importing Meta-World."""
    return {"mt10": 10, "mt50": 50}.get(benchmark, 1)


def is_benchmark(name: str) -> bool:
    """Whether ``name`` is mt10, mt50 or a Meta-World v3 task."""
    if name in MULTI_TASK:
        return True
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # imported lazily: it loads MuJoCo

    return name in ALL_V3_ENVIRONMENTS


#: What a benchmark may be, for error messages.
ALLOWED = "mt10, mt50 or a Meta-World v3 task name such as reach-v3"
