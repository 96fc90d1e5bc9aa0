"""Method name -> how the encoder, task encoder and trunks are built.

This is the only module that knows the method zoo. Each builder returns :class:`Networks`
initialised with the reference rule (:func:`ptsl.nets.mlp.weight_init`) from an explicit
generator, so the same seed gives the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from .agent import Actor, Critic, MultiTaskSAC, Networks, SACHyper
from .config import ExperimentConfig, RunConfig, SACConfig
from .nets.mlp import IdentityEncoder, MLPTrunk, weight_init


@dataclass(frozen=True)
class Shapes:
    """Sizes an agent is built for."""

    obs_dim: int
    action_dim: int
    num_tasks: int


def _mtsac(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes,
           generator: torch.Generator) -> Networks:
    """MT-SAC as the reference runs it: the networks see the observation only (no task id,
    reference quirk Q6) unless ``task_onehot`` adds a one-hot (garage's variant)."""

    def encoder() -> IdentityEncoder:
        return IdentityEncoder(shapes.obs_dim, shapes.num_tasks, onehot=exp.task_onehot)

    feat = encoder().feature_dim
    actor = Actor(encoder(), MLPTrunk(feat, exp.hidden_dim, 2 * shapes.action_dim, exp.num_layers),
                  concat_task_encoding=False, log_std_min=sac.log_std_min,
                  log_std_max=sac.log_std_max)
    q_in = feat + shapes.action_dim
    critic = Critic(encoder(), MLPTrunk(q_in, exp.hidden_dim, 1, exp.num_layers),
                    MLPTrunk(q_in, exp.hidden_dim, 1, exp.num_layers), concat_task_encoding=False)
    weight_init(actor, generator)
    weight_init(critic, generator)
    return Networks(actor=actor, critic=critic, actor_params=list(actor.trunk.parameters()))


BUILDERS: dict[str, Callable[..., Networks]] = {"mtsac": _mtsac}


def build_networks(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes,
                   generator: torch.Generator) -> Networks:
    """Networks of ``exp.method`` for ``shapes``."""
    return BUILDERS[exp.method](exp, sac, shapes, generator)


def build_agent(cfg: RunConfig, shapes: Shapes, task_names: tuple[str, ...],
                device: torch.device | str = "cpu", seed: int | None = None) -> MultiTaskSAC:
    """The agent of one run, on ``device``, initialised from ``seed`` (default: the run's seed)."""
    device = torch.device(device)
    init_gen = torch.Generator().manual_seed(cfg.seed if seed is None else seed)
    nets = build_networks(cfg.experiment, cfg.sac, shapes, init_gen)
    sample_gen = torch.Generator(device=device).manual_seed((cfg.seed if seed is None else seed) + 1)
    s = cfg.sac
    hp = SACHyper(discount=s.discount, init_temperature=s.init_temperature, actor_lr=s.actor_lr,
                  critic_lr=s.critic_lr, alpha_lr=s.alpha_lr, task_encoder_lr=s.task_encoder_lr,
                  tau=s.tau, encoder_tau=s.encoder_tau, critic_loss_guard=s.critic_loss_guard)
    meta: dict[str, Any] = {"config": cfg.to_dict(), "obs_dim": shapes.obs_dim,
                            "action_dim": shapes.action_dim, "task_names": list(task_names)}
    agent = MultiTaskSAC(nets, shapes.num_tasks, shapes.action_dim, hp, sample_gen, meta)
    return agent.to(device)


def load_agent(path: str, device: torch.device | str = "cpu") -> MultiTaskSAC:
    """Load an agent saved with :meth:`MultiTaskSAC.save` (the public entry point).

    >>> agent = load_agent("data/runs/mt10_mtsac-1/model.pt")
    >>> action = agent.act(obs, task_index)
    """
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no saved agent at {p}")
    blob = torch.load(p, map_location=device, weights_only=False)
    meta = blob["meta"]
    cfg = RunConfig.from_dict(meta["config"])
    shapes = Shapes(meta["obs_dim"], meta["action_dim"], len(meta["task_names"]))
    agent = build_agent(cfg, shapes, tuple(meta["task_names"]), device=device)
    agent.load_state_dict(blob["model"])
    return agent
