"""How each method's networks are built, one function per method of the registry
(:mod:`ptsl.core.methods`), and the agent of one run.

Each builder returns :class:`~ptsl.core.agent.sac.Networks` initialised with the reference rule
(:func:`ptsl.core.agent.nets.mlp.weight_init`) from an explicit generator, so the same seed gives the
same weights. Every builder takes ``(exp, sac, shapes, generator, task_embeddings)``; only the
methods marked ``embeddings`` in the registry read the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..benchmarks import ACTION_DIM, EMBEDDING_DIM, OBS_DIM, num_tasks
from ..config import ExperimentConfig, RunConfig, SACConfig
from ..errors import ConfigError
from ..methods import method
from .nets.care import CAREEncoder
from .nets.mlp import IdentityEncoder, MLPTrunk, init_expert_layers, weight_init
from .nets.moore import MOOREMLP
from .nets.multihead import MultiHeadMLP
from .nets.paco import ACTOR_HEAD_SCALE, CRITIC_HEAD_SCALE, PaCoMLP
from .nets.pal import FeedForwardPAL, init_pal_layers
from .nets.soft_modularization import FeedForwardEncoder, ObsActionProjection, SoftModularizedMLP
from .nets.task_encoder import TaskEncoder, load_task_embeddings
from .sac import Actor, Critic, MultiTaskSAC, Networks

Table = np.ndarray | torch.Tensor | None


@dataclass(frozen=True)
class Shapes:
    """Sizes an agent is built for."""

    obs_dim: int
    action_dim: int
    num_tasks: int


def _reference_init(module: nn.Module, generator: torch.Generator) -> None:
    """mtrl/PTSL ``weight_init`` over a whole actor or critic: Xavier Linear with bias, zero
    bias-free Linear (PTSL projections), Xavier per expert, standard-normal PAL task layers."""
    weight_init(module, generator)
    init_expert_layers(module, generator)
    init_pal_layers(module, generator)


def _observation_nets(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes,
                      make_trunk: Callable[[int, int], nn.Module]) -> Networks:
    """Identity encoders (the observation, with a task one-hot where ``task_onehot`` says) and
    ``make_trunk(in_dim, out_dim)`` trunks for the actor and both Q's, not yet initialised. The
    actor optimiser owns the actor trunk; there is no task encoder."""

    def encoder() -> IdentityEncoder:
        return IdentityEncoder(shapes.obs_dim, shapes.num_tasks, onehot=exp.task_onehot)

    feat = encoder().feature_dim
    actor = Actor(encoder(), make_trunk(feat, 2 * shapes.action_dim), concat_task_encoding=False,
                  log_std_min=sac.log_std_min, log_std_max=sac.log_std_max)
    q_in = feat + shapes.action_dim
    critic = Critic(encoder(), make_trunk(q_in, 1), make_trunk(q_in, 1),
                    concat_task_encoding=False)
    return Networks(actor=actor, critic=critic, actor_params=list(actor.trunk.parameters()))


def _own_init(nets: Networks, generator: torch.Generator) -> Networks:
    """Initialise the actor trunk, then Q1, then Q2, each by its own ``reset_parameters``
    (the baselines' authors' initialisations, not the reference's ``weight_init``)."""
    for trunk in (nets.actor.trunk, nets.critic.q1, nets.critic.q2):
        trunk.reset_parameters(generator)
    return nets


def mtsac(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
          task_embeddings: Table = None) -> Networks:
    """MT-SAC as the reference runs it: the networks see the observation only (no task id,
    reference Q6) unless ``task_onehot`` adds a one-hot (garage's variant)."""

    def make(in_dim: int, out_dim: int) -> MLPTrunk:
        return MLPTrunk(in_dim, exp.hidden_dim, out_dim, exp.num_layers)

    nets = _observation_nets(exp, sac, shapes, make)
    weight_init(nets.actor, generator)
    weight_init(nets.critic, generator)
    return nets


def mhsac(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
          task_embeddings: Table = None) -> Networks:
    """Multi-head SAC as mtrl's multi-head command builds it (reference 2.3): the observation
    only (``task_onehot`` appends a one-hot, as Meta-World+ does), a shared body and one 2-layer
    head per task in the actor and in each Q (:mod:`ptsl.core.agent.nets.multihead`)."""

    def make(in_dim: int, out_dim: int) -> MultiHeadMLP:
        return MultiHeadMLP(in_dim, exp.hidden_dim, out_dim, exp.num_layers, shapes.num_tasks)

    return _own_init(_observation_nets(exp, sac, shapes, make), generator)


def moore(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
          task_embeddings: Table = None) -> Networks:
    """MOORE as its authors build it for SAC on Meta-World: the actor and each Q a complete
    mixture of ``num_experts`` orthogonal experts with its own task weights and per-task heads
    (their ``MetaworldSACMixtureMH*Network``; :mod:`ptsl.core.agent.nets.moore`); the observation
    only, no task encoder."""

    def make(in_dim: int, out_dim: int) -> MOOREMLP:
        return MOOREMLP(in_dim, exp.hidden_dim, out_dim, exp.num_layers, shapes.num_tasks,
                        exp.num_experts)

    return _own_init(_observation_nets(exp, sac, shapes, make), generator)


def paco(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
         task_embeddings: Table = None) -> Networks:
    """PaCo as the Meta-World+ baselines build it: the actor and each Q a complete
    parameter-compositional network with ``num_parameter_sets`` sets per layer and its own task
    composition weights (their ``PaCoNetwork``; :mod:`ptsl.core.agent.nets.paco`); the observation
    only, no task encoder."""

    def make(in_dim: int, out_dim: int) -> PaCoMLP:
        # A Q-function's head has one output; Meta-World+ draws it from a wider interval.
        scale = CRITIC_HEAD_SCALE if out_dim == 1 else ACTOR_HEAD_SCALE
        return PaCoMLP(in_dim, exp.hidden_dim, out_dim, exp.num_layers, shapes.num_tasks,
                       exp.num_parameter_sets, scale)

    return _own_init(_observation_nets(exp, sac, shapes, make), generator)


def softmod(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
            task_embeddings: Table = None) -> Networks:
    """Soft Modularization as the mtrl README command builds it (reference 3).

    Reference Q7: the trunk depth is hard-coded to 2 layers, ``exp.num_layers`` is ignored.
    The task encoding routes the trunks and is not concatenated to the features.
    """
    task_encoder = TaskEncoder.learned(shapes.num_tasks, generator)
    # Actor and critic encoders are tied (mtrl should_tie_encoders): one module, and only the
    # critic optimiser trains it (actor_params below hold the actor trunk only).
    encoder = FeedForwardEncoder(shapes.obs_dim)
    feat = encoder.feature_dim

    def trunk(out_dim: int) -> SoftModularizedMLP:
        return SoftModularizedMLP(exp.num_experts, feat, out_dim, exp.hidden_dim,
                                  num_layers=method("softmod").fixed_layers)

    def q() -> ObsActionProjection:
        return ObsActionProjection(feat + shapes.action_dim, feat, trunk(1))

    actor = Actor(encoder, trunk(2 * shapes.action_dim), concat_task_encoding=False,
                  log_std_min=sac.log_std_min, log_std_max=sac.log_std_max)
    critic = Critic(encoder, q(), q(), concat_task_encoding=False)
    _reference_init(critic, generator)
    _reference_init(actor.trunk, generator)  # the tied encoder is initialised once, above
    return Networks(actor=actor, critic=critic, task_encoder=task_encoder,
                    actor_params=list(actor.trunk.parameters()))


def _care_encoders(exp: ExperimentConfig, shapes: Shapes, task_embeddings: Table,
                   generator: torch.Generator) -> tuple[TaskEncoder, CAREEncoder, CAREEncoder]:
    """Task encoder on the frozen embeddings, and the critic and actor mixture encoders.

    Reference Q8: the actor's experts are the critic's (tied Parameter objects, trained by
    the critic loss), but its attention gate is its own and no optimiser ever steps it.
    """
    if task_embeddings is None:
        raise ValueError(f"method {exp.method!r} needs task_embeddings (see "
                         "ptsl.core.agent.nets.task_encoder.load_task_embeddings)")
    table = torch.as_tensor(np.asarray(task_embeddings), dtype=torch.float32)
    if table.ndim != 2 or table.shape[0] != shapes.num_tasks:
        raise ValueError(f"task embeddings must have shape ({shapes.num_tasks}, D), "
                         f"got {tuple(table.shape)}")
    task_encoder = TaskEncoder.pretrained(table, generator)
    critic_enc = CAREEncoder(shapes.obs_dim, exp.num_experts, task_encoder.out_dim)
    actor_enc = CAREEncoder(shapes.obs_dim, exp.num_experts, task_encoder.out_dim,
                            experts=critic_enc.experts)
    _reference_init(critic_enc, generator)
    _reference_init(actor_enc.gate, generator)
    return task_encoder, critic_enc, actor_enc


def _care_like(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
               task_embeddings: Table, make_trunk: Callable[[int, int], nn.Module]) -> Networks:
    """CARE encoders + ``make_trunk(in_dim, out_dim)`` trunks; input = concat(z_enc, task enc)."""
    task_encoder, critic_enc, actor_enc = _care_encoders(exp, shapes, task_embeddings, generator)
    feat = critic_enc.feature_dim + task_encoder.out_dim
    actor = Actor(actor_enc, make_trunk(feat, 2 * shapes.action_dim), concat_task_encoding=True,
                  log_std_min=sac.log_std_min, log_std_max=sac.log_std_max)
    q_in = feat + shapes.action_dim
    critic = Critic(critic_enc, make_trunk(q_in, 1), make_trunk(q_in, 1), concat_task_encoding=True)
    _reference_init(actor.trunk, generator)
    _reference_init(critic.q1, generator)
    _reference_init(critic.q2, generator)
    # Optimiser membership (reference 4.3): actor optimiser = actor trunk only; the critic
    # optimiser gets all critic parameters (experts, critic gate, Q's); the task encoder has its
    # own optimiser and, because the actor sees a detached encoding, only the critic loss trains it.
    return Networks(actor=actor, critic=critic, task_encoder=task_encoder,
                    actor_params=list(actor.trunk.parameters()))


def _pal_trunk(exp: ExperimentConfig, shapes: Shapes) -> Callable[[int, int], FeedForwardPAL]:
    if exp.pal_dim is None:
        raise ValueError(f"experiment {exp.name or exp.method!r}: pal_dim is unset; resolve it "
                         "with ptsl.core.config.resolve_run (it fills in the top-level pal_dim)")

    def make(in_dim: int, out_dim: int) -> FeedForwardPAL:
        return FeedForwardPAL(in_dim, exp.hidden_dim, out_dim, exp.num_layers, exp.pal_dim,
                              shapes.num_tasks, shared_projection=exp.shared_projection,
                              residual_mode=exp.residual_mode)
    return make


def care(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
         task_embeddings: Table = None) -> Networks:
    """CARE (reference 4): mixture-of-encoders + plain MLP trunks (hidden_dim, num_layers)."""

    def make(in_dim: int, out_dim: int) -> MLPTrunk:
        return MLPTrunk(in_dim, exp.hidden_dim, out_dim, exp.num_layers)
    return _care_like(exp, sac, shapes, generator, task_embeddings, make)


def care_ptsl(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
              task_embeddings: Table = None) -> Networks:
    """CARE+PTSL (reference 5.1): CARE's encoders, PAL trunks for the actor and every Q."""
    return _care_like(exp, sac, shapes, generator, task_embeddings, _pal_trunk(exp, shapes))


def sac_ptsl(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes, generator: torch.Generator,
             task_embeddings: Table = None) -> Networks:
    """MT-SAC+PTSL: identity encoder, no task encoder, PAL trunks; the task index reaches the
    networks only through the PAL task layers."""
    nets = _observation_nets(exp, sac, shapes, _pal_trunk(exp, shapes))
    _reference_init(nets.actor, generator)
    _reference_init(nets.critic, generator)
    return nets


#: Each method's builder, under its name in the registry (:data:`ptsl.core.methods.METHODS`).
BUILDERS: dict[str, Callable[..., Networks]] = {
    "mtsac": mtsac, "softmod": softmod, "care": care, "care_ptsl": care_ptsl,
    "sac_ptsl": sac_ptsl, "mhsac": mhsac, "moore": moore, "paco": paco}


def build_networks(exp: ExperimentConfig, sac: SACConfig, shapes: Shapes,
                   generator: torch.Generator, task_embeddings: Table = None) -> Networks:
    """Networks of ``exp.method`` for ``shapes``.

    ``task_embeddings`` ((num_tasks, 768), in task order) is required by the methods that read
    embeddings and ignored by the others. A zero table of the right shape is fine when the weights
    are then loaded from a state dict, which restores the table.
    """
    return BUILDERS[exp.method](exp, sac, shapes, generator, task_embeddings)


def check_buildable(exp: ExperimentConfig) -> None:
    """Build ``exp``'s networks once for its benchmark's sizes, so that a combination the
    architecture cannot express (say a residual mode where the automatic rule skips a projection)
    fails at once as a :class:`ConfigError` naming the experiment, before any environment starts."""
    shapes = Shapes(OBS_DIM, ACTION_DIM, num_tasks(exp.benchmark))
    table = np.zeros((shapes.num_tasks, EMBEDDING_DIM), np.float32)
    try:
        build_networks(exp, SACConfig(), shapes, torch.Generator().manual_seed(0), table)
    except ValueError as exc:
        raise ConfigError(f"experiments.{exp.name}: {exc}") from None


def build_agent(cfg: RunConfig, shapes: Shapes, task_names: tuple[str, ...],
                device: torch.device | str = "cpu", seed: int | None = None,
                task_embeddings: Table = None) -> MultiTaskSAC:
    """The agent of one run, on ``device``, initialised from ``seed`` (default: the run's seed).

    The methods that read embeddings read those of ``task_names`` from
    ``data/task_embeddings/metaworld-mt50.json`` unless ``task_embeddings`` is given.
    """
    device = torch.device(device)
    if method(cfg.experiment.method).embeddings and task_embeddings is None:
        task_embeddings = load_task_embeddings(task_names)
    seed = cfg.seed if seed is None else seed
    nets = build_networks(cfg.experiment, cfg.sac, shapes, torch.Generator().manual_seed(seed),
                          task_embeddings)
    sample_gen = torch.Generator(device=device).manual_seed(seed + 1)
    meta: dict[str, Any] = {"config": cfg.to_dict(), "obs_dim": shapes.obs_dim,
                            "action_dim": shapes.action_dim, "task_names": list(task_names)}
    agent = MultiTaskSAC(nets, shapes.num_tasks, shapes.action_dim, cfg.sac, sample_gen, meta)
    return agent.to(device)
