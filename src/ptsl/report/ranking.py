"""One sentence under a table on what it shows against a published source: whether our rows
rank as the source ranks them, and which of our rows the 95% intervals cannot tell apart.

The ranking compares like with like: ours computed the source's way (``<metric>_as_published``)
against the source's values, both at the table's step. The intervals are those of the mean over
seeds (``<metric>_mean_low``/``_high``), so they are named only where the source's statistic is
that mean of each run's final mean over tasks and the table's kind is ``final``.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any, Mapping

import pandas as pd

from .comparison import Beside


def _ranked(values: Mapping[str, float], labels: Mapping[str, str], digits: int) -> str:
    """Best first; equal values (at the shown precision) joined by ``=``, not ranked."""
    order = sorted(values, key=lambda n: -values[n])
    shown = [f"{values[n]:.{digits}f}" for n in order]
    out = f"{labels[order[0]]} {shown[0]}"
    for i in range(1, len(order)):
        out += f" {'=' if shown[i] == shown[i - 1] else '>'} {labels[order[i]]} {shown[i]}"
    return out


def ranking_text(frame: pd.DataFrame, shown: Beside, metric: str, primary: str) -> str | None:
    """The sentence for ``metric`` (None where fewer than two rows have a value of the same
    source beside ours)."""
    rows: list[Mapping[str, Any]] = frame.to_dict("records")
    sources = Counter(r[f"published_{metric}_source"] for r in rows
                      if not pd.isna(r[f"published_{metric}"]))
    if not sources:
        return None
    source_name = sources.most_common(1)[0][0]
    rows = [r for r in rows if r[f"published_{metric}_source"] == source_name
            and not pd.isna(r[f"{metric}_as_published"])]
    if len(rows) < 2:
        return None
    ref = next(i for i, s in enumerate(shown.refs, start=1) if s.name == source_name)
    source = shown.refs[ref - 1]
    labels = {r["experiment"]: r["label"] for r in rows}
    ours = {r["experiment"]: float(r[f"{metric}_as_published"]) for r in rows}
    theirs = {r["experiment"]: float(r[f"published_{metric}"]) for r in rows}
    pairs = list(combinations(ours, 2))
    decided = [(a, b) for a, b in pairs if theirs[a] != theirs[b]]
    agree = sum((ours[a] - ours[b]) * (theirs[a] - theirs[b]) > 0 for a, b in decided)
    step = int(rows[0]["step"])
    at = (f"at {step:,} steps per task" if step == shown.step else
          f"ours at {step:,} steps per task, [{ref}]'s at {shown.step:,}")
    text = (f"Ranked by {metric} success {at} ({source.statistic.short}): "
            f"ours {_ranked(ours, labels, 3)}; [{ref}] {_ranked(theirs, labels, 2)}. "
            f"[{ref}]'s order holds for {agree} of the {len(decided)} pairs it orders")
    if min(int(r["seeds"]) for r in rows) < 2:
        text += "; with one seed a row has no interval, so none of these orders is told apart"
    elif source.statistic.run_score == "final" and source.statistic.over_seeds == "mean" \
            and primary == "final":
        low = {r["experiment"]: r[f"{metric}_mean_low"] for r in rows}
        high = {r["experiment"]: r[f"{metric}_mean_high"] for r in rows}
        overlap = [f"{labels[a]} and {labels[b]}" for a, b in pairs
                   if max(low[a], low[b]) <= min(high[a], high[b])]
        text += ("; the 95% intervals of our means overlap for "
                 + ("; ".join(overlap) if overlap else "no pair")
                 + (f" ({len(overlap)} of {len(pairs)} pairs)" if overlap else ""))
    return text + "."
