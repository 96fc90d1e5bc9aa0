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
"""

import importlib
import sys
import types

from .config import ConfigError, RunConfig
from .methods import load_agent

# The API's names are loaded from ptsl.api on first use, not here: every pipeline stage imports
# this package, and an edit to the API must not change what a stage runs (nor re-train a model).
_API = ("make_env", "make_config", "config_from_params", "train", "evaluate", "Evaluation",
        "TrainResult", "BUDGETS")

__all__ = ["load_agent", "ConfigError", "RunConfig", *_API]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


class _Package(types.ModuleType):
    """``ptsl.train`` and ``ptsl.evaluate`` name both a submodule and an API function. Importing
    the submodule would make it an attribute of the package and hide the function; the package
    keeps the function (the submodule stays importable: ``from ptsl.train import train``)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
