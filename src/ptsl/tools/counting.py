"""Parameter counts by PTSL's rule and the hidden sizes that equalise them (reference 5.6).

Rule (PTSL ``Agent.summary`` / ``count_parameters.py``): actor + critic (encoder and both Q's)
+ critic target + log-alpha, tensors tied between modules counted in each module, task encoder
excluded. Counts are taken from built networks
(:meth:`ptsl.core.agent.sac.MultiTaskSAC.parameter_count`), not from a formula, so they follow the
architecture actually trained.

``python -m ptsl.tools.counting`` prints the table of reference 5.6 (MT10) and the reference's
MT50 sizes at its 12-dim observation, and the hidden sizes that match CARE's count at the 39-dim
observation of Meta-World v3 on MT10 and MT50.
"""

from __future__ import annotations

from ..cli import ArgumentParser, run
from ..core.config import ExperimentConfig
from ..core.counts import count_parameters

#: The reference's MT10 settings (reference 5.6): (label, experiment fields).
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
#: The field's baselines at their references' sizes (mtrl's multi-head option; MOORE's authors,
#: 4 experts on MT10; Meta-World+'s MT10 PaCo run, 5 parameter sets), counted by the same rule
#: at the same observation.
BASELINE_SETTINGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("MT-MH-SAC (mtrl)", dict(method="mhsac", hidden_dim=400, num_layers=3)),
    ("MOORE, 4 experts", dict(method="moore", hidden_dim=400, num_layers=3, num_experts=4)),
    ("PaCo, 5 parameter sets", dict(method="paco", hidden_dim=400, num_layers=3,
                                    num_parameter_sets=5)),
)

def solve_hidden_dim(exp: ExperimentConfig, target: int, obs_dim: int, action_dim: int,
                     num_tasks: int) -> int:
    """The ``hidden_dim`` whose count is closest to ``target`` (ties: the smaller one).

    The count grows strictly with ``hidden_dim`` (every term does, and the automatic projection
    rule takes a minimum of growing terms), so a bisection finds it. The bracket starts at the
    experiment's own size and halves or doubles from there: the smallest sizes are never built
    (MOORE needs ``hidden_dim >= num_experts``).
    """
    def count(h: int) -> int:
        return count_parameters(exp.model_copy(update={"hidden_dim": h}), obs_dim, action_dim,
                                num_tasks)

    lo = hi = exp.hidden_dim
    if count(hi) >= target:
        while lo > 1 and count(lo) >= target:
            hi, lo = lo, lo // 2
    else:
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
    """(label, experiment, count) for every MT10 setting of reference 5.6 at ``obs_dim``."""
    return [(label, e, count_parameters(e, obs_dim, action_dim, num_tasks))
            for label, fields in REFERENCE_SETTINGS for e in (_exp(fields),)]


#: The reference's MT50 settings (its README and configs): sizes chosen to match CARE's count at
#: the 12-dim observation, as the MT10 ones of reference 5.6.
REFERENCE_MT50_SETTINGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("CARE", dict(method="care", hidden_dim=400, num_layers=3)),
    ("CARE+PTSL", dict(method="care_ptsl", hidden_dim=274, num_layers=3, pal_dim=32)),
    ("CARE+PTSL 2 layers", dict(method="care_ptsl", hidden_dim=331, num_layers=2, pal_dim=42)),
    ("MT-SAC+PTSL", dict(method="sac_ptsl", hidden_dim=325, num_layers=3, pal_dim=32)),
)

#: Settings whose hidden size is solved to match CARE (400x3) of their benchmark:
#: (label, benchmark, fields without hidden_dim).
SOLVED_SETTINGS: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("CARE+PTSL shared none/sum, L=3", "mt10", dict(method="care_ptsl", num_layers=3,
                                                    pal_dim=50)),
    ("CARE+PTSL linear residual, L=3", "mt10", dict(method="care_ptsl", num_layers=3,
                                                    pal_dim=50, residual_mode="linear")),
    ("CARE+PTSL project residual, L=3", "mt10", dict(method="care_ptsl", num_layers=3,
                                                     pal_dim=50, residual_mode="project")),
    ("CARE+PTSL 2 layers, shared", "mt10", dict(method="care_ptsl", num_layers=2, pal_dim=50)),
    ("CARE+PTSL 2 layers, independent", "mt10", dict(method="care_ptsl", num_layers=2,
                                                     pal_dim=50, shared_projection=False)),
    ("MT-SAC+PTSL, L=3", "mt10", dict(method="sac_ptsl", num_layers=3, pal_dim=50)),
    ("CARE+PTSL, L=3, P=32", "mt50", dict(method="care_ptsl", num_layers=3, pal_dim=32)),
    ("CARE+PTSL 2 layers, P=42", "mt50", dict(method="care_ptsl", num_layers=2, pal_dim=42)),
    ("MT-SAC+PTSL, L=3, P=32", "mt50", dict(method="sac_ptsl", num_layers=3, pal_dim=32)),
    ("MT-MH-SAC, L=3", "mt10", dict(method="mhsac", num_layers=3)),
    ("MOORE, 4 experts, L=3", "mt10", dict(method="moore", num_layers=3, num_experts=4)),
    ("MT-MH-SAC, L=3", "mt50", dict(method="mhsac", num_layers=3)),
    ("MOORE, 6 experts, L=3", "mt50", dict(method="moore", num_layers=3, num_experts=6)),
    ("PaCo, K=5, L=3", "mt10", dict(method="paco", num_layers=3, num_parameter_sets=5)),
    ("PaCo, K=20, L=3", "mt50", dict(method="paco", num_layers=3, num_parameter_sets=20)),
)
#: Tasks of each benchmark the solved settings belong to.
NUM_TASKS = {"mt10": 10, "mt50": 50}


def care_count(benchmark: str, obs_dim: int, action_dim: int = 4) -> int:
    """CARE 400x3's count on ``benchmark``: the target the matched sizes are solved for."""
    return count_parameters(_exp(dict(method="care", hidden_dim=400, num_layers=3), benchmark),
                            obs_dim, action_dim, NUM_TASKS[benchmark])


def solved_table(obs_dim: int = 39, action_dim: int = 4
                 ) -> list[tuple[str, str, int, int, int]]:
    """Per setting: (label, benchmark, solved hidden_dim, its count, CARE's count)."""
    rows = []
    for label, benchmark, fields in SOLVED_SETTINGS:
        target, n = care_count(benchmark, obs_dim, action_dim), NUM_TASKS[benchmark]
        e = _exp(dict(fields, hidden_dim=400), benchmark)
        h = solve_hidden_dim(e, target, obs_dim, action_dim, n)
        rows.append((label, benchmark, h, count_parameters(
            e.model_copy(update={"hidden_dim": h}), obs_dim, action_dim, n), target))
    return rows


def format_report(obs_ref: int = 12, obs_v3: int = 39) -> str:
    """The text ``python -m ptsl.tools.counting`` prints."""
    def line(label: str, e: ExperimentConfig, n: int) -> str:
        pal = f" P={e.pal_dim}" if e.pal_dim is not None else ""
        return f"  {label:<34} H={e.hidden_dim:<4} L={e.num_layers}{pal:<6} {n:>10,}"

    lines = [f"Parameter counts, MT10 (N=10), obs_dim={obs_ref}, action_dim=4 "
             "(reference 5.6 in docs/reference.md):"]
    lines += [line(label, e, n) for label, e, n in reference_table(obs_ref)]
    for label, fields in BASELINE_SETTINGS:
        e = _exp(fields)
        lines.append(line(label, e, count_parameters(e, obs_ref, 4, 10)))
    lines.append(f"Parameter counts, MT50 (N=50), obs_dim={obs_ref}: the reference's MT50 sizes")
    for label, fields in REFERENCE_MT50_SETTINGS:
        e = _exp(fields, "mt50")
        lines.append(line(label, e, count_parameters(e, obs_ref, 4, 50)))
    rows = solved_table(obs_v3)
    for benchmark in NUM_TASKS:
        target = care_count(benchmark, obs_v3)
        lines.append(f"Hidden sizes matching CARE (H=400, L=3) on {benchmark.upper()} at "
                     f"obs_dim={obs_v3}: target {target:,}")
        lines += [f"  {label:<34} H={h:<4} {n:>10,} ({n - target:+,})"
                  for label, bench, h, n, _ in rows if bench == benchmark]
    return "\n".join(lines)


def params_report(path: str) -> str:
    """For every experiment of the params file at ``path`` that ``matches`` another: the
    hidden_dim that matches that row's count at the params' observation size, beside the one written
    (a study's sizes are solved this way, docs/studies.md)."""
    from ..core.benchmarks import ACTION_DIM, num_tasks, observation_dim
    from ..ops.params import load_params, run_config

    params = load_params(path)
    obs_dim = observation_dim(params.env.observation)
    lines = [f"Hidden sizes matching each row's `matches` in {path} (obs_dim={obs_dim}):"]
    for name in params.experiments:
        exp = run_config(params, name, params.seeds[0]).experiment
        if exp.matches is None:
            continue
        n_tasks = num_tasks(exp.benchmark)
        target = count_parameters(run_config(params, exp.matches, params.seeds[0]).experiment,
                                  obs_dim, ACTION_DIM, n_tasks)
        h = solve_hidden_dim(exp, target, obs_dim, ACTION_DIM, n_tasks)
        n = count_parameters(exp.model_copy(update={"hidden_dim": h}), obs_dim, ACTION_DIM,
                             n_tasks)
        note = "" if h == exp.hidden_dim else f"  <- params say {exp.hidden_dim}"
        lines.append(f"  {name:<34} H={h:<4} {n:>10,} ({n - target:+,} against "
                     f"{exp.matches}'s {target:,}){note}")
    return "\n".join(lines)


def main() -> None:
    """Print the count table, or with ``--params FILE`` the matched sizes of that file's rows."""
    ap = ArgumentParser(prog="python -m ptsl.tools.counting", description=__doc__)
    ap.add_argument("--params", default=None,
                    help="solve the matched hidden sizes of this params file's experiments")
    args = ap.parse_args()
    print(params_report(args.params) if args.params else format_report())


if __name__ == "__main__":
    run(main)
