"""How many seeds a study needs: the power of each paired contrast a study reports, and the
pairs a next study needs to tell a given gain from none (:mod:`ptsl.report.power`).

    python -m ptsl.tools.power mt10-b1280                  # its contrasts' spreads, gains 0.05 and 0.09
    python -m ptsl.tools.power mt10-cpu --effect 0.06      # another gain
    python -m ptsl.tools.power --sd 0.051 --pairs 5        # a spread from elsewhere

For every contrast of the study (``studies/<name>/reports/tables/*_contrasts.csv``, written by its
aggregate), the spread (sd) of its per-seed differences and the one-sided upper confidence bound
on it (the spread to plan with when the sd comes from few pairs); then for each gain, the power
the study had at its own number of pairs, and the pairs a two-sided paired t test needs for the
planned power at the spread and at its bound. Printed as a Markdown table, to paste into a
study's PREREGISTRATION.md. Run it from the project root.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..cli import ArgumentParser, real, run, whole
from ..ops.study import study_folder
from ..report.power import ALPHA, POWER, paired_power, pairs_needed, sd_upper_bound

#: The gains asked about unless ``--effect`` names others: 0.05, a gain worth reporting, and
#: 0.09, the paper's CARE+PTSL gain over CARE at 100k on MT10.
EFFECTS = (0.05, 0.09)


def study_spreads(folder: Path) -> list[tuple[str, int, float]]:
    """``(contrast, pairs, sd of the per-seed differences)`` for every contrast the study's
    reports hold, the primary one marked."""
    from ..report.contrasts import contrast_groups

    tables = folder / "reports" / "tables"
    files = sorted(tables.glob("*_contrasts.csv"))
    if not files:
        raise FileNotFoundError(
            f"{tables}: no *_contrasts.csv; name contrasts under the study's tables in "
            f"{folder / 'params.yaml'} and run `make study-{folder.name}`")
    out = []
    for path in files:
        for label, minus, g in contrast_groups(path):
            mark = " (primary)" if bool(g["primary"].iloc[0]) else ""
            if len(g) >= 2:
                out.append((f"{label} − {minus}{mark}", len(g),
                            float(g["difference"].std(ddof=1))))
    return out


def table(spreads: list[tuple[str, int, float]], effects: tuple[float, ...], power: float,
          alpha: float, bound: float) -> str:
    """The Markdown table: a line per contrast and gain."""
    lines = [f"| contrast | pairs | sd [{bound:.0%} upper bound] | gain | power at its pairs "
             f"| pairs for {power:.0%} power | at the bound |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for name, n, sd in spreads:
        if not sd > 0:  # every seed the same difference (say 0: neither row learned anything)
            lines += [f"| {name} | {n} | 0 (no spread to plan from) | {effect:g} | — | — | — |"
                      for effect in effects]
            continue
        upper = sd_upper_bound(sd, n, bound)
        for effect in effects:
            need = [pairs_needed(effect, s, power, alpha) for s in (sd, upper)]
            cells = [f"{x:,}" if x is not None else "over 1,000" for x in need]
            lines.append(f"| {name} | {n} | {sd:.3f} [{upper:.3f}] | {effect:g} | "
                         f"{paired_power(n, effect, sd, alpha):.2f} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m ptsl.tools.power", description=__doc__)
    ap.add_argument("study", nargs="?", help="the study (a folder under studies/) whose "
                                             "contrasts give the spreads")
    ap.add_argument("--sd", type=real(0),
                    help="a spread of per-seed differences instead of a study's (with --pairs)")
    ap.add_argument("--pairs", type=whole(2), help="how many pairs --sd came from")
    ap.add_argument("--effect", type=real(0), action="append",
                    help="a gain to tell from none, repeatable (default: 0.05 and 0.09)")
    ap.add_argument("--power", type=real(0, 1), default=POWER,
                    help="the power to plan for (default: %(default)s)")
    ap.add_argument("--alpha", type=real(0, 1), default=ALPHA,
                    help="the two-sided test's level (default: %(default)s)")
    ap.add_argument("--bound", type=real(0, 1), default=POWER,
                    help="the level of the sd's one-sided upper bound (default: %(default)s)")
    args = ap.parse_args(argv)
    if (args.study is None) == (args.sd is None):
        ap.error("name a study or give --sd with --pairs, not both")
    if (args.sd is None) != (args.pairs is None):
        ap.error("--sd and --pairs go together")
    effects = tuple(args.effect or EFFECTS)
    if args.study is not None:
        spreads = study_spreads(study_folder(Path.cwd(), args.study))
        if not spreads:
            print(f"error: studies/{args.study}: no contrast has two pairs or more",
                  file=sys.stderr)
            return 2
        head = f"Study {args.study}"
    else:
        spreads = [("given", args.pairs, args.sd)]
        head = f"sd {args.sd:g} over {args.pairs} pairs"
    print(f"{head}: a two-sided paired t test at {args.alpha:g}; the pairs for "
          f"{args.power:.0%} power at the spread and at its {args.bound:.0%} upper bound.\n")
    print(table(spreads, effects, args.power, args.alpha, args.bound), end="")
    return 0


if __name__ == "__main__":
    run(main)
