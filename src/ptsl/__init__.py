"""Reproducible multi-task RL on Meta-World: MT-SAC, Soft Modularization, CARE and PTSL.

The small public API::

    from ptsl import load_agent, make_env
    agent = load_agent("data/runs/mt10_mtsac-1/model.pt")
    env = make_env("mt10", seed=1)               # the MT10 tasks under the project's protocol
    obs = env.reset()                            # (10, 39): one row per task
    step = env.step(agent.act(obs, env.task_ids))  # deterministic tanh(mean)
    agent.save("my_agent.pt")
"""

from .envs import make_env
from .methods import load_agent

__all__ = ["load_agent", "make_env"]
