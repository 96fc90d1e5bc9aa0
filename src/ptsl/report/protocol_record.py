"""The protocol record of a run set (``reports/data/protocol.json``): what a reader needs to
compare these numbers with another paper's, in one file. The versions are the pins every
training and evaluation machine must run (requirements/compute.txt, enforced by
``check_machine``; the aggregate stage passes them in), never one machine's record, so the file
is the same wherever it is written.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..ops.params import Params

#: The packages whose versions the record names.
VERSIONED = ("metaworld", "mujoco", "gymnasium", "torch")
# What the code does, whatever the params (src/ptsl/core: loop.py, buffer.py, agent.py,
# evaluation.py; docs/differences.md).
POLICY = "deterministic: tanh of the policy's mean action"
SUCCESS = ("Meta-World's success flag at any step of an episode; a task's rate is the mean over "
           "its episodes, a run's the mean over tasks")
TASK_SAMPLING = ("no sampling: one environment per task, every task steps once per vector step; "
                 "each update draws its batch uniformly from all tasks' transitions in one "
                 "replay buffer")
TIME_LIMIT = ("targets bootstrap through the time limit: the last transition of an episode "
              "stores the true next observation with not_done = 1")


def protocol_record(params: Params, pins: Mapping[str, str]) -> dict[str, Any]:
    """The record of the run set ``params`` defines; ``pins``: package -> pinned version."""
    env = params.env
    fixed = env.goals == "fixed"
    return {
        "protocol": params.protocol,
        "versions": {name: pins.get(name) for name in VERSIONED},
        "environment": {
            "tasks": "Meta-World v3",
            "reward_version": env.reward_version,
            "reward_normalized": ("divided by a running standard deviation"
                                  if env.normalize_reward else "raw"),
            "episode_length": env.episode_length,
            "goals": ("one goal per task, drawn by the seed and fixed for the run" if fixed
                      else "resampled from the 50 goals per task at every reset"),
            # Named only when set: Meta-World v3's full observation is the default.
            **({"observation": "Meta-World v1's 12 numbers: hand xyz, object xyz padded to 6, "
                               "goal xyz"} if env.observation == "v1" else {}),
        },
        "evaluation": {
            "episodes_per_task": params.train.eval_episodes,
            "final_evaluation_episodes_per_task": params.evaluate.episodes,
            "goals": ("the run's fixed goal of each task" if fixed
                      else "episode k runs on each task's k-th goal"),
            "policy": POLICY,
            "success": SUCCESS,
            "every": params.train.eval_every,
        },
        "training": {
            "task_sampling": TASK_SAMPLING,
            "time_limit": TIME_LIMIT,
            "q_value_clip": None,
            "training_success": ("each training episode's any-step success under the "
                                 "stochastic policy, a rate per task over the episodes "
                                 "finished since the previous evaluation"),
        },
        "budget": {"name": params.budget, "steps_per_task": params.train.steps,
                   "long_steps_per_task": params.train.long_steps, "seeds": list(params.seeds),
                   "long_seeds": list(params.long_seeds), "batch_size": params.sac.batch_size},
        "tables": {name: {"title": t.title, "rows": list(t.rows),
                          "step": params.table_step(t), "seeds": list(params.table_seeds(t)),
                          "aggregation": f"{params.report.primary}, per run",
                          "headline_metric": params.report.metric}
                   for name, t in params.tables.items()},
    }

