"""Reproducible multi-task RL on Meta-World: MT-SAC, Soft Modularization, CARE and PTSL.

The Python API (:mod:`ptsl.api`)::

    from ptsl import evaluate, load_agent, make_config, make_env, train

    config = make_config("mtsac", "reach-v3", hidden_dim=64, steps=300, eval_every=150)
    result = train(config)                      # result.agent, result.curve (one row per evaluation)
    print(evaluate(result.agent).success)       # per-task success of deterministic episodes
    env = make_env("reach-v3", evaluation=True)
    action = result.agent.predict(env.reset(), env.task_ids)   # predict is agent.act
    agent = load_agent("data/runs/mt10_mtsac-1/model.pt")      # an agent the pipeline trained

``config_from_params("mt10_care", 1)`` gives the config the DVC stage ``train@mt10_care-1`` trains.

The package in layers, each a folder:

- :mod:`ptsl.core`: what computes a result (configuration of one run, environments, networks,
  agent, training and evaluation loops, records); all a training or evaluation stage depends on.
- :mod:`ptsl.ops`: what runs the pipeline (the params file, machine checks, MLflow tracking, the
  grid, budgets, views).
- :mod:`ptsl.report`: records -> tables, statistics, figures, the README results block.
- :mod:`ptsl.tools`: developer tools no stage runs (benchmark, parameter counting, learning check).

Beside them, :mod:`ptsl.cli`: what every command answers alike (``--help``, an unknown argument
named, an expected error in one line); every layer but the core may use it.

``import ptsl`` loads nothing heavy: each name below is imported from :mod:`ptsl.api` on first use.
"""

import importlib

_API = ("make_env", "make_config", "config_from_params", "train", "evaluate", "load_agent",
        "Evaluation", "TrainResult", "BUDGETS", "budgets", "protocols", "ConfigError",
        "RunConfig")

__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
