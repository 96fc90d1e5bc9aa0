"""Every method, and the PTSL variants whose gradient paths differ, at small sizes: the cases
the update tests run for each method."""

from __future__ import annotations

from ptsl.core.agent.builders import Shapes
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig

SHAPES = Shapes(obs_dim=39, action_dim=4, num_tasks=4)
NAMES = ("reach-v3", "push-v3", "pick-place-v3", "door-open-v3")

# Every method, and the PTSL variants whose gradient paths differ (independent projections,
# each residual mode), at small sizes.
METHODS = {
    "mtsac": {"method": "mtsac", "hidden_dim": 32, "num_layers": 3},
    "mtsac_onehot": {"method": "mtsac", "hidden_dim": 32, "num_layers": 2, "task_onehot": True},
    "softmod": {"method": "softmod", "hidden_dim": 32},
    "care": {"method": "care", "hidden_dim": 32, "num_layers": 3},
    "care_ptsl": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8},
    "care_ptsl_indep": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 2, "pal_dim": 8,
                        "shared_projection": False},
    "care_ptsl_sum": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8,
                      "residual_mode": "sum"},
    "care_ptsl_linear": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8,
                         "residual_mode": "linear"},
    "care_ptsl_project": {"method": "care_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8,
                          "residual_mode": "project"},
    "sac_ptsl": {"method": "sac_ptsl", "hidden_dim": 32, "num_layers": 3, "pal_dim": 8},
    "mhsac": {"method": "mhsac", "hidden_dim": 32, "num_layers": 2},
    "moore": {"method": "moore", "hidden_dim": 32, "num_layers": 2, "num_experts": 3},
    "paco": {"method": "paco", "hidden_dim": 32, "num_layers": 2, "num_parameter_sets": 3},
}


def variant_cfg(exp: dict) -> RunConfig:
    """A tiny run config of one variant (batch 48)."""
    return RunConfig(name="t", seed=3, experiment=ExperimentConfig(benchmark="mt10", **exp),
                     env=EnvConfig(), sac=SACConfig(batch_size=48),
                     train=TrainConfig(steps=10, eval_every=5, checkpoint_every=5))
