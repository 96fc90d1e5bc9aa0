"""Parameter counts by PTSL's rule and the hidden sizes that equalise them (reference doc 5.6).

Rule (PTSL ``Agent.summary`` / ``count_parameters.py``): actor + critic (encoder and both Q's)
+ critic target + log-alpha, tensors tied between modules counted in each module, task encoder
excluded. Counts are taken from built networks
(:meth:`ptsl.core.agent.MultiTaskSAC.parameter_count`), not from a formula, so they follow the
architecture actually trained.

``python -m ptsl.tools.counting`` prints the doc-5.6 table at the reference's 12-dim observation
and the hidden sizes that match CARE's count at the 39-dim observation of Meta-World v3.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.agent import MultiTaskSAC
from ..core.benchmarks import EMBEDDING_DIM
from ..core.builders import Shapes, build_networks
from ..core.config import ExperimentConfig, SACConfig
from ..core.methods import method

#: Reference MT10 settings of doc 5.6: (label, experiment fields).
REFERENCE_SETTINGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("MT-SAC", dict(method="mtsac", hidden_dim=400, num_layers=3)),
    ("CARE", dict(method="care", hidden_dim=400, num_layers=3)),
    ("CARE+PTSL shared none/sum", dict(method="care_ptsl", hidden_dim=326, num_layers=3,
                                       pal_dim=50)),
    ("CARE+PTSL linear residual", dict(method="care_ptsl", hidden_dim=326, num_layers=3, pal_dim=50,
                                       residual_mode="linear")),
    ("CARE+PTSL project residual", dict(method="care_ptsl", hidden_dim=321, num_layers=3,
                                        pal_dim=50, residual_mode="project")),
    ("CARE+PTSL none at H=321 (README)", dict(method="care_ptsl", hidden_dim=321, num_layers=3,
                                              pal_dim=50)),
    ("CARE+PTSL 2 layers, shared", dict(method="care_ptsl", hidden_dim=400, num_layers=2,
                                        pal_dim=50)),
    ("CARE+PTSL 2 layers, independent", dict(method="care_ptsl", hidden_dim=400, num_layers=2,
                                             pal_dim=50, shared_projection=False)),
    ("MT-SAC+PTSL", dict(method="sac_ptsl", hidden_dim=367, num_layers=3, pal_dim=50)),
)

def count_parameters(exp: ExperimentConfig, obs_dim: int, action_dim: int, num_tasks: int) -> int:
    """Parameters of ``exp``'s agent by the reference rule (task encoder excluded)."""
    shapes = Shapes(obs_dim, action_dim, num_tasks)
    # Values do not matter for a count; the frozen table is a buffer and the task encoder is
    # excluded anyway, so a zero table stands in for the embeddings file.
    table = (np.zeros((num_tasks, EMBEDDING_DIM), np.float32)
             if method(exp.method).embeddings else None)
    gen = torch.Generator().manual_seed(0)
    nets = build_networks(exp, SACConfig(), shapes, gen, table)
    agent = MultiTaskSAC(nets, num_tasks, action_dim, SACConfig(),
                         torch.Generator().manual_seed(0))
    return agent.parameter_count()


def solve_hidden_dim(exp: ExperimentConfig, target: int, obs_dim: int, action_dim: int,
                     num_tasks: int) -> int:
    """The ``hidden_dim`` whose count is closest to ``target`` (ties: the smaller one).

    The count grows strictly with ``hidden_dim`` (every term does, and the automatic projection
    rule takes a minimum of growing terms), so a bisection finds it.
    """
    def count(h: int) -> int:
        return count_parameters(exp.model_copy(update={"hidden_dim": h}), obs_dim, action_dim,
                                num_tasks)

    lo, hi = 1, 2
    while count(hi) < target:
        lo, hi = hi, hi * 2
    # Invariant: count(lo) < target <= count(hi), or lo == 1.
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(mid) < target:
            lo = mid
        else:
            hi = mid
    if count(lo) >= target:  # only when lo == 1 already reaches the target
        return lo
    return lo if target - count(lo) <= count(hi) - target else hi


def _exp(fields: dict[str, object], benchmark: str = "mt10") -> ExperimentConfig:
    return ExperimentConfig(benchmark=benchmark, **fields)  # type: ignore[arg-type]


def reference_table(obs_dim: int = 12, action_dim: int = 4, num_tasks: int = 10
                    ) -> list[tuple[str, ExperimentConfig, int]]:
    """(label, experiment, count) for every doc-5.6 MT10 setting at ``obs_dim``."""
    return [(label, e, count_parameters(e, obs_dim, action_dim, num_tasks))
            for label, fields in REFERENCE_SETTINGS for e in (_exp(fields),)]


#: Settings whose hidden size is solved to match CARE: (label, fields without hidden_dim).
SOLVED_SETTINGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("CARE+PTSL shared none/sum, L=3", dict(method="care_ptsl", num_layers=3, pal_dim=50)),
    ("CARE+PTSL linear residual, L=3", dict(method="care_ptsl", num_layers=3, pal_dim=50,
                                            residual_mode="linear")),
    ("CARE+PTSL project residual, L=3", dict(method="care_ptsl", num_layers=3, pal_dim=50,
                                             residual_mode="project")),
    ("CARE+PTSL 2 layers, shared", dict(method="care_ptsl", num_layers=2, pal_dim=50)),
    ("CARE+PTSL 2 layers, independent", dict(method="care_ptsl", num_layers=2, pal_dim=50,
                                             shared_projection=False)),
    ("MT-SAC+PTSL, L=3", dict(method="sac_ptsl", num_layers=3, pal_dim=50)),
)


def solved_table(obs_dim: int = 39, action_dim: int = 4, num_tasks: int = 10,
                 care_hidden: int = 400, care_layers: int = 3
                 ) -> tuple[int, list[tuple[str, int, int]]]:
    """CARE's count at ``obs_dim`` and, per setting, (label, solved hidden_dim, its count)."""
    target = count_parameters(_exp(dict(method="care", hidden_dim=care_hidden,
                                        num_layers=care_layers)), obs_dim, action_dim, num_tasks)
    rows = []
    for label, fields in SOLVED_SETTINGS:
        e = _exp(dict(fields, hidden_dim=care_hidden))
        h = solve_hidden_dim(e, target, obs_dim, action_dim, num_tasks)
        rows.append((label, h, count_parameters(e.model_copy(update={"hidden_dim": h}), obs_dim,
                                                action_dim, num_tasks)))
    return target, rows


def format_report(obs_ref: int = 12, obs_v3: int = 39) -> str:
    """The text ``python -m ptsl.tools.counting`` prints."""
    lines = [f"Parameter counts, MT10 (N=10), obs_dim={obs_ref}, action_dim=4 (reference doc 5.6):"]
    for label, e, n in reference_table(obs_ref):
        pal = f" P={e.pal_dim}" if e.pal_dim is not None else ""
        lines.append(f"  {label:<34} H={e.hidden_dim:<4} L={e.num_layers}{pal:<6} {n:>10,}")
    target, rows = solved_table(obs_v3)
    lines.append(f"Hidden sizes matching CARE (H=400, L=3) at obs_dim={obs_v3}: target {target:,}")
    for label, h, n in rows:
        lines.append(f"  {label:<34} H={h:<4} {n:>10,} ({n - target:+,})")
    return "\n".join(lines)


def main() -> None:
    """Print the count table (no arguments)."""
    print(format_report())


if __name__ == "__main__":
    main()
