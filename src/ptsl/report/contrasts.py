"""Paired contrasts between a table's rows: one row minus another, seed by seed.

A table may name contrasts (``tables.<t>.contrasts``, docs/studies.md): ``row`` minus ``minus``,
each run scored as the mean over tasks of the headline metric at the table's step (each run's
``report.primary`` value, as the table's mean column), the two runs of one seed paired (a seed
fixes the goals, the initialisation and the replay sampling's generator, so pairing removes what
the seed alone explains). For each contrast: the per-seed differences, their mean and a 95%
Student t interval on them, and one sentence that reads it (interval above 0, below 0 or across
it), with the published difference beside it where the table shows both rows' published values.

The same contrast over the tasks that some run of the table succeeded on at some step (the
others contribute 0 to both rows) is given too: a task no run ever learns scales every mean down
without telling the rows apart.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..ops.params import Params, TableConfig
from .comparison import Beside
from .stats import PREFIX, scores_at, task_columns, task_name

#: Coverage of the interval.
LEVEL = 0.95
#: Each one-sided test's level in the equivalence test (a 90% interval inside the margin).
TOST_ALPHA = 0.05


@dataclass(frozen=True)
class PairedContrast:
    """``row`` minus ``minus`` over the seeds both have a value for."""

    row: str
    minus: str
    primary: bool
    seeds: tuple[int, ...]
    differences: tuple[float, ...]       # per seed, over all tasks
    learned_differences: tuple[float, ...]  # per seed, over the tasks some run learned
    published: float | None              # the published row minus minus at the step, if shown
    values: tuple[float, ...]            # per seed, ``row``'s own score (mean over tasks)
    minus_values: tuple[float, ...]      # per seed, ``minus``'s own score

    @property
    def n(self) -> int:
        return len(self.differences)

    def mean(self, learned: bool = False) -> float:
        d = self.learned_differences if learned else self.differences
        return float(np.mean(d)) if d else float("nan")

    def interval(self, learned: bool = False) -> tuple[float, float]:
        """The 95% Student t interval of the mean difference (NaN with fewer than two pairs)."""
        return t_interval(self.learned_differences if learned else self.differences)

    def equivalence(self, margin: float) -> tuple[float, float, bool]:
        """Two one-sided paired t tests at 5% each against ``-margin`` and ``+margin`` (TOST):
        the 90% t interval, and whether it lies inside the margin (equivalent)."""
        lo, hi = t_interval(self.differences, 1 - 2 * TOST_ALPHA)
        return lo, hi, bool(-margin < lo and hi < margin)

    def smallest_effect(self) -> float:
        """The smallest gain this contrast's paired test would detect with 80% power at its
        pairs and its differences' spread (:func:`ptsl.report.power.smallest_effect`)."""
        from .power import smallest_effect

        sd = float(np.std(self.differences, ddof=1)) if self.n >= 2 else float("nan")
        return smallest_effect(self.n, sd) if sd > 0 else float("nan")


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Two-sided Student t interval of the mean of ``values``; NaN with fewer than two."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return float("nan"), float("nan")
    from scipy import stats  # loaded where a statistic is computed

    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return float(x.mean() - half), float(x.mean() + half)


def learned_tasks(curves: pd.DataFrame, rows: Sequence[str], seeds: Sequence[int],
                  step: int) -> tuple[str, ...]:
    """The tasks on which some run of ``rows`` (over ``seeds``, up to ``step``) succeeded at
    least once, in evaluation or in training."""
    sub = curves[curves["experiment"].isin(rows) & curves["seed"].isin(seeds)
                 & (curves["step"] <= step)]
    tasks: list[str] = []
    for metric in PREFIX:
        for col in task_columns(sub, rows[0], metric):
            if (sub[col].fillna(0) > 0).any() and task_name(col) not in tasks:
                tasks.append(task_name(col))
    order = [task_name(c) for c in task_columns(sub, rows[0], "evaluation")]
    return tuple(t for t in order if t in tasks)


def paired_contrasts(params: Params, table: TableConfig, curves: pd.DataFrame,
                     shown: Beside) -> list[PairedContrast]:
    """Every contrast ``table`` names, computed from the runs' curves."""
    step, seeds = params.table_step(table), params.table_seeds(table)
    metric, kind = params.report.metric, params.report.primary
    learned = learned_tasks(curves, table.rows, seeds, step)
    out = []
    for c in table.contrasts:
        a = scores_at(curves, c.row, seeds, step, kind, metric)
        b = scores_at(curves, c.minus, seeds, step, kind, metric)
        keep = [i for i in range(len(seeds)) if not (np.isnan(a.values[i]).any()
                                                     or np.isnan(b.values[i]).any())]
        cols = [a.tasks.index(t) for t in learned]
        va, vb = a.values[keep].mean(axis=1), b.values[keep].mean(axis=1)
        diff = va - vb
        on_learned = (a.values[keep][:, cols].mean(axis=1) - b.values[keep][:, cols].mean(axis=1)
                      if cols else np.full(len(keep), np.nan))
        out.append(PairedContrast(
            row=c.row, minus=c.minus, primary=c.primary,
            seeds=tuple(int(seeds[i]) for i in keep),
            differences=tuple(float(x) for x in diff),
            learned_differences=tuple(float(x) for x in on_learned),
            published=_published_difference(shown, c.row, c.minus, metric),
            values=tuple(float(x) for x in va), minus_values=tuple(float(x) for x in vb)))
    return out


def _published_difference(shown: Beside, row: str, minus: str, metric: str) -> float | None:
    """The first source's ``row`` minus ``minus`` at the table's step, when it shows both."""
    a = dict(shown.cells.get((row, metric), []))
    b = dict(shown.cells.get((minus, metric), []))
    common = sorted(set(a) & set(b))
    return None if not common else float(a[common[0]].value - b[common[0]].value)


def verdict(c: PairedContrast, labels: Mapping[str, str]) -> str:
    """One sentence that reads the contrast's interval."""
    lo, hi = c.interval()
    a, b = labels[c.row], labels[c.minus]
    if c.n < 2:
        return f"{a} minus {b}: {c.n} pair(s), too few for an interval."
    if lo > 0:
        reading = f"{a} is above {b}: the interval lies above 0"
    elif hi < 0:
        reading = f"{a} is below {b}: the interval lies below 0"
    else:
        reading = f"{a} and {b} are not told apart: the interval spans 0"
    text = (f"{a} minus {b}: {c.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] over {c.n} pairs "
            f"({sum(d > 0 for d in c.differences)} of {c.n} above 0); {reading}")
    if c.published is not None:
        inside = lo <= c.published <= hi
        text += (f"; the published difference, {c.published:+.2f}, is "
                 f"{'inside' if inside else 'outside'} it")
    return text + "."


#: The columns of ``tables/<table>_contrasts.csv`` (:func:`contrasts_frame`): a line per
#: contrast and seed. Named even where no contrast has a pair, so the file always reads back.
CSV_COLUMNS = ("row", "minus", "label", "minus_label", "primary", "seed", "difference",
               "difference_learned_tasks", "mean", "ci_low", "ci_high", "mean_learned_tasks",
               "ci_low_learned_tasks", "ci_high_learned_tasks", "published_difference", "value",
               "minus_value")


def contrasts_frame(contrasts: Sequence[PairedContrast], labels: Mapping[str, str]) -> pd.DataFrame:
    """One line per contrast and seed (the per-seed differences), for the CSV."""
    rows = []
    for c in contrasts:
        lo, hi = c.interval()
        llo, lhi = c.interval(learned=True)
        for seed, d, dl, va, vb in zip(c.seeds, c.differences, c.learned_differences, c.values,
                                       c.minus_values):
            rows.append({"row": c.row, "minus": c.minus, "label": labels[c.row],
                         "minus_label": labels[c.minus], "primary": c.primary, "seed": seed,
                         "difference": d, "difference_learned_tasks": dl, "mean": c.mean(),
                         "ci_low": lo, "ci_high": hi, "mean_learned_tasks": c.mean(True),
                         "ci_low_learned_tasks": llo, "ci_high_learned_tasks": lhi,
                         "published_difference": c.published, "value": va, "minus_value": vb})
    return pd.DataFrame(rows, columns=list(CSV_COLUMNS))


def contrast_groups(path: Path) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """The contrasts one ``tables/<table>_contrasts.csv`` holds, in the table's order:
    ``(label, minus label, its lines: one per seed)``; a contrast without pairs has none."""
    frame = pd.read_csv(path)
    for (label, minus), lines in frame.groupby(["label", "minus_label"], sort=False):
        yield label, minus, lines


def equivalence_sentence(c: PairedContrast, labels: Mapping[str, str], margin: float) -> str:
    """The equivalence test of a contrast, and the smallest gain its test could detect."""
    lo, hi, equivalent = c.equivalence(margin)
    a, b = labels[c.row], labels[c.minus]
    if np.isnan(lo):
        return f"Equivalence within ±{margin:g}: {c.n} pair(s), too few for a test."
    reading = (f"{a} and {b} are equivalent within ±{margin:g}" if equivalent else
               f"equivalence within ±{margin:g} is not shown")
    return (f"Equivalence (two one-sided paired t tests at {TOST_ALPHA:.0%}, margin "
            f"±{margin:g}): the 90% t interval is [{lo:+.3f}, {hi:+.3f}]: {reading}. At its "
            f"{c.n} pairs and spread (sd {np.std(c.differences, ddof=1):.3f}) the test detects "
            f"a gain of {c.smallest_effect():.3f} with 80% power (two-sided, 5%).")


def contrasts_markdown(contrasts: Sequence[PairedContrast], labels: Mapping[str, str],
                       learned: Sequence[str], all_tasks: Sequence[str], metric: str,
                       step: int, equivalence: float | None = None) -> str:
    """The contrasts section of a table: a sentence per contrast (the primary's with its
    equivalence test where the table sets a margin), then the per-seed table."""
    if not contrasts:
        return ""
    seeds = sorted({s for c in contrasts for s in c.seeds})
    lines = [f"**Paired contrasts** ({metric} success at {step:,} vector steps per task, each "
             f"run's mean over tasks; seed by seed; mean [{LEVEL:.0%} t interval]):", ""]
    for c in contrasts:
        text = f"- {'**Primary.** ' if c.primary else ''}{verdict(c, labels)}"
        if c.primary and equivalence is not None:
            text += " " + equivalence_sentence(c, labels, equivalence)
        lines.append(text)
    missing = [t for t in all_tasks if t not in learned]
    lines += ["", "| contrast | " + " | ".join(f"seed {s}" for s in seeds)
              + " | mean [95% CI] | over the tasks some run learned |",
              "|---|" + "---:|" * len(seeds) + "---|---|"]
    for c in contrasts:
        by_seed = dict(zip(c.seeds, c.differences))
        lo, hi = c.interval()
        llo, lhi = c.interval(learned=True)
        cells = [f"{by_seed[s]:+.3f}" if s in by_seed else "—" for s in seeds]
        lines.append(f"| {labels[c.row]} − {labels[c.minus]} | " + " | ".join(cells)
                     + f" | {c.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] | "
                     + f"{c.mean(True):+.3f} [{llo:+.3f}, {lhi:+.3f}] |")
    lines += ["", (f"Tasks no run of this table succeeded on at any step (left out of the last "
                   f"column): {', '.join(missing)}." if missing else
                   "Every task was succeeded on by some run of this table.")]
    return "\n".join(lines) + "\n"


__all__ = ["LEVEL", "PairedContrast", "contrasts_frame", "contrasts_markdown",
           "equivalence_sentence", "learned_tasks", "paired_contrasts", "t_interval", "verdict"]
