"""Reproducible multi-task RL on Meta-World: MT-SAC, Soft Modularization, CARE and PTSL.

The small public API for trained agents::

    from ptsl import load_agent
    agent = load_agent("data/runs/mt10_mtsac-1/model.pt")
    action = agent.act(obs, task_index)          # deterministic tanh(mean)
    agent.save("my_agent.pt")
"""

from .methods import load_agent

__all__ = ["load_agent"]
