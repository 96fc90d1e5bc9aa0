"""The method registry: every method once, with what it is and what it reads.

The configuration (which names and options are allowed), the builders, the Python API, the
parameter-counting tool and the benchmark all read this table instead of keeping lists of their
own. It imports no torch and nothing of the agent: :data:`ptsl.core.agent.builders.BUILDERS` maps
each method's name to its builder.
"""

from __future__ import annotations

from dataclasses import dataclass

#: PTSL residual modes (reference 5.4).
RESIDUAL_MODES = ("none", "sum", "linear", "project")
#: Experiment keys that only some methods read; each method lists those it reads.
OPTIONS = ("task_onehot", "num_experts", "num_parameter_sets", "pal_dim", "shared_projection",
           "residual_mode")
_PTSL_OPTIONS = frozenset({"pal_dim", "shared_projection", "residual_mode"})


@dataclass(frozen=True)
class Method:
    """One method: its name in params.yaml, a label for people, and what its builder reads."""

    name: str
    label: str
    description: str
    #: reads the pretrained task-description embeddings (CARE's task encoder)
    embeddings: bool = False
    #: has PTSL layers: reads pal_dim (the top-level one unless the experiment sets its own)
    ptsl: bool = False
    #: the method-specific experiment keys (:data:`OPTIONS`) it reads
    options: frozenset[str] = frozenset()
    #: residual modes its networks can express
    residual_modes: tuple[str, ...] = ("none",)
    #: a trunk depth the method fixes whatever ``num_layers`` says (None: it reads num_layers)
    fixed_layers: int | None = None

    def size(self, hidden_dim: int, num_layers: int, pal_dim: int | None) -> str:
        """How people name a network of this method: ``400x3``, ``326x3, pal_dim 50``."""
        layers = self.fixed_layers or num_layers
        return f"{hidden_dim}x{layers}" + (f", pal_dim {pal_dim}" if self.ptsl else "")

    def unread_options(self) -> tuple[str, ...]:
        """The method-specific keys it ignores (they must keep their defaults)."""
        return tuple(o for o in OPTIONS if o not in self.options)


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("mtsac", "MT-SAC", "multi-task SAC with one temperature per task; the networks see "
           "the observation only (reference Q6), task_onehot adds a one-hot",
           options=frozenset({"task_onehot"})),
    Method("softmod", "Soft Modularization", "routed modular trunks on a learned task "
           "embedding (trunk depth fixed at 2, reference Q7)",
           options=frozenset({"num_experts"}), fixed_layers=2),
    Method("care", "CARE", "mixture of state encoders weighted by the task description",
           embeddings=True, options=frozenset({"num_experts"})),
    Method("care_ptsl", "CARE+PTSL", "CARE's encoders with PTSL trunks", embeddings=True,
           ptsl=True, options=frozenset({"num_experts"}) | _PTSL_OPTIONS,
           residual_modes=RESIDUAL_MODES),
    # The identity-encoder variant skips its first down-projection, so the low-rank inputs of
    # consecutive layers differ in size and no residual mode applies (reference 5.4).
    Method("sac_ptsl", "MT-SAC+PTSL", "MT-SAC with PTSL trunks; the task reaches the networks "
           "only through the PTSL task layers", ptsl=True, options=_PTSL_OPTIONS),
    # The field's baselines beyond the paper.
    Method("mhsac", "MT-MH-SAC", "multi-task SAC with a shared body and one head per task "
           "(mtrl's multi-head option, reference 2.3); the networks see the observation only, "
           "task_onehot adds a one-hot", options=frozenset({"task_onehot"})),
    Method("moore", "MOORE", "mixture of orthogonal experts: num_experts expert networks made "
           "orthonormal per sample by Gram-Schmidt, mixed by learned task weights, one output "
           "head per task (Hendawy et al., ICLR 2024)", options=frozenset({"num_experts"})),
    Method("paco", "PaCo", "parameter-compositional multi-task RL: every layer, the head "
           "included, holds num_parameter_sets parameter sets composed by the task's learned "
           "weights (Sun et al., NeurIPS 2022, as Meta-World+ builds it)",
           options=frozenset({"num_parameter_sets"})),
)}


def method(name: str) -> Method:
    """The registry entry of ``name`` (a KeyError names the known ones)."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; allowed: {', '.join(METHODS)}") from None
