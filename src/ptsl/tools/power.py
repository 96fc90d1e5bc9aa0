"""How many seeds a study needs: the power of each paired contrast a study reports, the smallest
gain it could tell from none, and the pairs a next study needs (:mod:`ptsl.report.power`).

    python -m ptsl.tools.power mt10-b1280                  # its contrasts' spreads, gains 0.05 and 0.09
    python -m ptsl.tools.power mt10-cpu --effect 0.06      # another gain
    python -m ptsl.tools.power --sd 0.051 --pairs 5        # a spread from elsewhere

For every contrast of the study (``studies/<name>/reports/tables/*_contrasts.csv``, written by its
aggregate), two spreads of a difference: paired, the sd of the per-seed differences; unpaired,
``sqrt(var(row) + var(minus))`` over the seeds, the sd a difference of two independent runs has.
Where the rows' scores correlate negatively across seeds, pairing widens the interval and the
unpaired spread is the smaller. The plan takes the smaller of the two and says which, with its
one-sided upper confidence bound (the spread to plan with when it comes from few seeds); then for
each gain, the power the study had with its own (paired) test at its pairs, and the pairs (or
seeds per row) a two-sided t test needs for the planned power at the planned spread and at its
bound. An unpaired plan is computed as a paired one at the unpaired spread (n - 1 degrees of
freedom, a little conservative against Welch's). Also per contrast: the smallest gain the study
could tell from none with that power. Printed as Markdown, to paste into a PREREGISTRATION.md.
Run it from the project root.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from ..cli import ArgumentParser, real, run, whole
from ..ops.study import study_folder
from ..report.power import (ALPHA, POWER, paired_power, pairs_needed, sd_upper_bound,
                            smallest_effect)

#: The gains asked about unless ``--effect`` names others: 0.05, a gain worth reporting, and
#: 0.09, the paper's CARE+PTSL gain over CARE at 100k on MT10.
EFFECTS = (0.05, 0.09)


@dataclass(frozen=True)
class Spread:
    """One contrast's spreads: ``paired`` (sd of the per-seed differences) and ``unpaired``
    (``sqrt(var(row) + var(minus))``; None where the rows' own scores are not at hand)."""

    name: str
    pairs: int
    paired: float
    unpaired: float | None = None

    @property
    def planned(self) -> tuple[str, float]:
        """``(which, sd)``: the smaller spread, the one a next study plans with."""
        if self.unpaired is not None and self.unpaired < self.paired:
            return "unpaired", self.unpaired
        return "paired", self.paired


def study_spreads(folder: Path) -> list[Spread]:
    """The spreads of every contrast the study's reports hold (two pairs or more), the primary
    one marked."""
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
            if len(g) < 2:
                continue
            unpaired = (math.sqrt(g["value"].var(ddof=1) + g["minus_value"].var(ddof=1))
                        if {"value", "minus_value"} <= set(g.columns) else None)
            out.append(Spread(f"{label} − {minus}{mark}", len(g),
                              float(g["difference"].std(ddof=1)), unpaired))
    return out


def table(spreads: list[Spread], effects: tuple[float, ...], power: float, alpha: float,
          bound: float) -> str:
    """The Markdown table: a line per contrast and gain, then a line per contrast giving the
    smallest gain the study's own test could tell from none."""
    lines = [f"| contrast | pairs | sd paired | sd unpaired | planned from [{bound:.0%} upper "
             f"bound] | gain | power at its pairs | pairs for {power:.0%} power | at the bound |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    smallest = []
    for s in spreads:
        unpaired = f"{s.unpaired:.3f}" if s.unpaired is not None else "—"
        which, sd = s.planned
        if not sd > 0:  # every seed the same difference (say 0: neither row learned anything)
            lines += [f"| {s.name} | {s.pairs} | {s.paired:.3f} | {unpaired} | no spread to plan "
                      f"from | {effect:g} | — | — | — |" for effect in effects]
            continue
        upper = sd_upper_bound(sd, s.pairs, bound)
        for effect in effects:
            need = [pairs_needed(effect, x, power, alpha) for x in (sd, upper)]
            cells = [f"{x:,}" if x is not None else "over 1,000" for x in need]
            had = (f"{paired_power(s.pairs, effect, s.paired, alpha):.2f}" if s.paired > 0
                   else "—")
            lines.append(f"| {s.name} | {s.pairs} | {s.paired:.3f} | {unpaired} | {which} "
                         f"{sd:.3f} [{upper:.3f}] | {effect:g} | {had} | {cells[0]} | "
                         f"{cells[1]} |")
        if s.paired > 0:
            smallest.append(f"- {s.name}: {smallest_effect(s.pairs, s.paired, power, alpha):.3f} "
                            f"at its {s.pairs} pairs and paired sd {s.paired:.3f}")
    if smallest:
        lines += ["", f"The smallest gain each contrast's paired test could tell from none with "
                      f"{power:.0%} power:", *smallest]
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
        spreads = [Spread("given", args.pairs, args.sd)]
        head = f"sd {args.sd:g} over {args.pairs} pairs"
    print(f"{head}: a two-sided paired t test at {args.alpha:g}; the pairs for "
          f"{args.power:.0%} power at the spread and at its {args.bound:.0%} upper bound.\n")
    print(table(spreads, effects, args.power, args.alpha, args.bound), end="")
    return 0


if __name__ == "__main__":
    run(main)
