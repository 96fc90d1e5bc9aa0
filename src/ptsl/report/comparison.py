"""Which published values stand beside a table's rows, and the notes under the table that say
where each comes from.

A published value is shown in a row's column of the same metric only when its source was
measured under the active protocol (``params.protocol``) at the step per task the table stands
for (``report.published_steps``). Values of the active protocol at a step no table stands for
(2M steps per task) are listed under the table, not beside ours; sources of another protocol are
named once per table with their protocol (docs/statistics.md).

Beside a published number that may be one run's (its source's ``runs``: the PTSL launcher as
published turns a command's seeds into one run, reference Q10) ours is followed by the range of
our seeds' values; and the notes name, row by row, the settings (width, batch, rank) in which
the source's runs differ from ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.benchmarks import num_tasks
from ..core.methods import method
from ..ops.params import Params, TableConfig
from .published import SETTING_KEYS, Metric, Published, PublishedSource, PublishedValue

METRICS: tuple[Metric, ...] = ("evaluation", "training")


@dataclass(frozen=True)
class Beside:
    """The published values of one table: ``cells[(experiment, metric)]`` holds the
    ``(reference number, value)`` pairs shown in that cell; ``ours[(experiment, metric,
    reference number)]`` our number computed as that source computed its own (filled by the
    table, which has the runs); ``refs`` the sources in reference order; ``elsewhere`` the
    active protocol's values at other steps, and ``ours_elsewhere[(source name, experiment,
    step)]`` ours computed the source's way at such a step where our runs reached it (a study
    stopped at 100k beside a paper's curve at 50k); ``inactive`` the sources of these rows
    measured under another protocol. ``ranges`` and ``ranges_elsewhere`` (same keys as
    ``ours`` and ``ours_elsewhere``) hold the lowest and highest of our runs' values where there
    are two or more; ``settings[(source name, experiment)]`` the settings in which that source's
    runs of the row differ from ours, ``(key, theirs, ours)``."""

    step: int
    cells: dict[tuple[str, str], list[tuple[int, PublishedValue]]] = field(default_factory=dict)
    ours: dict[tuple[str, str, int], float | None] = field(default_factory=dict)
    refs: list[PublishedSource] = field(default_factory=list)
    elsewhere: list[tuple[PublishedSource, str, PublishedValue]] = field(default_factory=list)
    ours_elsewhere: dict[tuple[str, str, int], float | None] = field(default_factory=dict)
    inactive: list[PublishedSource] = field(default_factory=list)
    ranges: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)
    ranges_elsewhere: dict[tuple[str, str, int], tuple[float, float]] = field(
        default_factory=dict)
    settings: dict[tuple[str, str], list[tuple[str, int, int]]] = field(default_factory=dict)

    def ref_of(self, source: PublishedSource) -> int | None:
        """The reference number of ``source`` beside this table (None: not beside it)."""
        return self.refs.index(source) + 1 if source in self.refs else None


#: How each kind of ``runs`` reads in a note.
RUNS_TEXT = {"separate": "separate runs", "one": "one run", "likely one": "most likely one run",
             "uncertain": "possibly one run"}
#: How each setting reads in a note.
SETTING_TEXT = {"hidden_dim": "hidden_dim", "batch_size": "batch size", "pal_dim": "pal_dim"}


def our_settings(params: Params, experiment: str) -> dict[str, int | None]:
    """A row's settings as a source states its own: width, batch over all tasks, and the PTSL
    rank of a PTSL row (None for the others)."""
    exp = params.experiments[experiment]
    ptsl = method(exp.method).ptsl
    return {"hidden_dim": exp.hidden_dim,
            "batch_size": params.sac.totals(num_tasks(exp.benchmark)).batch_size,
            "pal_dim": (exp.pal_dim or params.pal_dim) if ptsl else None}


def setting_differences(params: Params, experiment: str, source: PublishedSource,
                        value: PublishedValue) -> list[tuple[str, int, int]]:
    """The settings the source states for ``value`` that differ from the row's, as
    ``(key, theirs, ours)``: ``[("hidden_dim", 400, 128), ("batch_size", 1280, 128)]``."""
    ours, theirs = our_settings(params, experiment), source.settings_of(value)
    return [(k, theirs[k], ours[k]) for k in SETTING_KEYS
            if theirs[k] is not None and ours[k] is not None and theirs[k] != ours[k]]


def _setting(diff: tuple[str, int, int]) -> str:
    key, theirs, ours = diff
    return f"{SETTING_TEXT[key]} {theirs:,} (ours {ours:,})"


def published_step(params: Params, table: TableConfig) -> int:
    """The step per task whose published values stand beside ``table``."""
    return getattr(params.report.published_steps, table.at)


def beside(params: Params, table: TableConfig, published: Published) -> Beside:
    """The published values that stand beside ``table``'s rows (none beside its
    ``unpublished`` rows)."""
    out = Beside(step=published_step(params, table))
    # A value at the other kind of table's step stands beside that table instead.
    table_steps = {params.report.published_steps.short, params.report.published_steps.long}
    for name in table.rows:
        if name in table.unpublished:
            continue
        exp = params.experiments[name]
        for metric in METRICS:
            for source, value in published.values_for(exp, metric):
                if source.protocol.preset != params.protocol:
                    if source not in out.inactive:
                        out.inactive.append(source)
                    continue
                # The same runs at every step: their settings once per source and row.
                out.settings.setdefault((source.name, name),
                                        setting_differences(params, name, source, value))
                if value.steps != out.step:
                    if value.steps not in table_steps:
                        out.elsewhere.append((source, name, value))
                else:
                    if source not in out.refs:
                        out.refs.append(source)
                    ref = out.refs.index(source) + 1
                    out.cells.setdefault((name, metric), []).append((ref, value))
    # Listed row by row in the table's order, each row's values by step.
    out.elsewhere.sort(key=lambda e: (table.rows.index(e[1]), e[2].steps))
    return out


def earlier_columns(beside_: Beside) -> list[tuple[int, int]]:
    """The ``(reference number, step)`` pairs a table shows in columns of their own, step by
    step: a source beside the table, at an earlier step per task that our runs reached (a study
    stopped at 100k beside a paper's curve at 50k and 100k)."""
    pairs = {(beside_.refs.index(source) + 1, v.steps) for source, name, v in beside_.elsewhere
             if source in beside_.refs and v.steps < beside_.step
             and (source.name, name, v.steps) in beside_.ours_elsewhere}
    return sorted(pairs, key=lambda p: (p[1], p[0]))


def published_elsewhere(beside_: Beside, source: PublishedSource, experiment: str,
                        step: int) -> PublishedValue | None:
    """``source``'s value for ``experiment`` at ``step``, one of the table's values at other
    steps (``beside_.elsewhere``), or None."""
    return next((v for s, name, v in beside_.elsewhere
                 if s == source and name == experiment and v.steps == step), None)


def earlier_cells(beside_: Beside, ref: int, step: int, experiment: str) -> tuple[str, str]:
    """A row's two cells of an :func:`earlier_columns` pair: ours computed the source's way at
    that step, and the source's value there (a dash where either is missing)."""
    source = beside_.refs[ref - 1]
    key = (source.name, experiment, step)
    found = published_elsewhere(beside_, source, experiment, step)
    spread = beside_.ranges_elsewhere.get(key) if found and source.runs_of(found).maybe_one \
        else None
    ours = (f"{_ours(beside_.ours_elsewhere[key])}{_range(spread)} [{ref}]"
            if key in beside_.ours_elsewhere else "—")
    return ours, (f"{_number(found.value, source)} [{ref}]" if found else "—")


def cell_text(found: list[tuple[int, PublishedValue]] | None, refs: list[PublishedSource]) -> str:
    """A published cell: ``0.39 [1]`` (several sources side by side), or a dash."""
    if not found:
        return "—"
    return ", ".join(f"{_number(v.value, refs[ref - 1])} [{ref}]" for ref, v in found)


def ours_text(beside_: Beside, experiment: str, metric: str) -> str:
    """Our cell beside a published one: ``0.412 [1]``, one number per source of that cell (each
    computed that source's way), or a dash."""
    found = beside_.cells.get((experiment, metric))
    if not found:
        return "—"
    cells = []
    for ref, v in found:
        key = (experiment, metric, ref)
        spread = beside_.ranges.get(key) if beside_.refs[ref - 1].runs_of(v).maybe_one else None
        cells.append(f"{_ours(beside_.ours.get(key))}{_range(spread)} [{ref}]")
    return ", ".join(cells)


def _ours(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _range(spread: tuple[float, float] | None) -> str:
    """Our seeds' lowest and highest value after our number: `` (0.210–0.300)``."""
    return "" if spread is None else f" ({spread[0]:.3f}–{spread[1]:.3f})"


def _number(x: float, source: PublishedSource) -> str:
    # As precise as the source: three decimals from a figure's data, two from a table or read
    # off a figure.
    return f"{x:.3f}" if source.obtained.how == "figure data" else f"{x:.2f}"


def _seeds(source: PublishedSource, values: list[PublishedValue]) -> str:
    counts = sorted({v.seeds or source.seeds for v in values}, key=str)
    if counts == ["not stated"]:
        return "seeds not stated"
    return " or ".join(str(c) for c in counts) + " seeds"


def _obtained(source: PublishedSource) -> str:
    ob = source.obtained
    if ob.how == "figure":
        return f"read off a figure (±{ob.precision:g})"
    if ob.how == "figure data":
        return "from the data of a figure"
    return "from a table"


def _environment(source: PublishedSource) -> str:
    version = source.protocol.env_version
    if source.comparable_environment:
        return f"Meta-World {version}"
    return f"Meta-World {version}, not the v3 tasks this project runs"


def protocol_text(source: PublishedSource) -> str:
    """The source's protocol in a few words."""
    p = source.protocol
    goals = "one fixed goal per task" if p.goals == "fixed" else "goals resampled"
    preset = "no preset of this project" if p.preset == "none" else f"`{p.preset}`"
    return (f"{preset}: {_environment(source)}, {p.reward_version} rewards, "
            f"{p.episode_length}-step episodes, {goals}")


def notes(beside_: Beside, params: Params, labels: dict[str, str]) -> str:
    """The notes under a table: each shown source with its metric, statistic, seeds and how
    its values were obtained; the active protocol's values at other steps; the sources of
    another protocol, named once with theirs."""
    lines = []
    for ref, source in enumerate(beside_.refs, start=1):
        shown = _shown(beside_, ref)
        value_notes = "; ".join(f"{labels[name]} {_number(v.value, source)}: {v.note}"
                                for name, v in shown if v.note)
        lines.append(
            f"[{ref}] {source.label} (`{source.file}`): {source.metric} success, "
            f"{source.statistic.text}; {_seeds(source, [v for _, v in shown])}, "
            f"{_runs_text(source, shown, labels)}; {_obtained(source)}; protocol "
            f"{protocol_text(source)}. Beside it, ours the same way: {source.statistic.short} "
            f"({source.metric} success)"
            + (", then in brackets the lowest and highest of our seeds' values, where one run "
               "of ours falls" if _ranged(beside_, ref) else "") + "."
            + (f" Notes: {value_notes}." if value_notes else "")
            + _settings_text(beside_, source, labels))
    if beside_.elsewhere:
        lines.append(elsewhere_text(beside_, labels))
    if beside_.inactive:
        listed = "; ".join(f"{s.label} (protocol {protocol_text(s)})" for s in beside_.inactive)
        lines.append(f"Not shown: published values for these rows measured under another "
                     f"protocol than the active `{params.protocol}`: {listed}.")
    if not lines:
        return "No published value for these rows.\n"
    head = (f"Published values beside ours are those measured at {beside_.step:,} steps per "
            f"task under the active protocol `{params.protocol}`" + (
                "." if beside_.refs else "; there is none for these rows."))
    return "\n".join([head, "", *[f"- {line}" for line in lines]]) + "\n"


def _runs_text(source: PublishedSource, shown: list[tuple[str, PublishedValue]],
               labels: dict[str, str]) -> str:
    """Whether the shown values' seeds were separate runs, and why: once if they agree, row by
    row if not."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, v in shown:
        names = groups.setdefault((source.runs_of(v).kind, source.runs_of(v).why), [])
        if labels[name] not in names:
            names.append(labels[name])
    if len(groups) <= 1:
        kind, why = next(iter(groups), (source.runs.kind, source.runs.why))
        return f"{RUNS_TEXT[kind]} ({why})"
    return ", ".join(f"for {', '.join(names)} {RUNS_TEXT[kind]} ({why})"
                     for (kind, why), names in groups.items())


def _ranged(beside_: Beside, ref: int) -> bool:
    """Whether a range of our seeds stands beside a value of source ``ref``."""
    source = beside_.refs[ref - 1]
    return any(r == ref and (name, metric, ref) in beside_.ranges and source.runs_of(v).maybe_one
               for (name, metric), found in beside_.cells.items() for r, v in found) or any(
        s == source and (s.name, name, v.steps) in beside_.ranges_elsewhere
        and source.runs_of(v).maybe_one and (ref, v.steps) in earlier_columns(beside_)
        for s, name, v in beside_.elsewhere)


def _rows_beside(beside_: Beside, source: PublishedSource) -> list[str]:
    """The rows a source stands beside, in the table's order of cells: at the table's step or
    in a column of an earlier step."""
    ref = beside_.ref_of(source)
    columns = earlier_columns(beside_)
    names = [name for (name, _), found in beside_.cells.items() for r, _ in found if r == ref]
    names += [name for s, name, v in beside_.elsewhere
              if s == source and (ref, v.steps) in columns]
    return list(dict.fromkeys(names))


def _settings_text(beside_: Beside, source: PublishedSource, labels: dict[str, str]) -> str:
    """The settings of the source's runs that differ from ours, row by row."""
    rows = [(name, beside_.settings.get((source.name, name), []))
            for name in _rows_beside(beside_, source)]
    # What every row shares, once; then each row's own.
    common = [d for d in rows[0][1] if all(d in diffs for _, diffs in rows)] \
        if len(rows) > 1 else []
    own = [(name, [d for d in diffs if d not in common]) for name, diffs in rows]
    listed = "; ".join(([f"{', '.join(map(_setting, common))} in every row"] if common else [])
                       + [f"{labels[name]}{' also' if common else ':'} "
                          f"{', '.join(map(_setting, diffs))}" for name, diffs in own if diffs])
    return f" Its runs' settings unlike ours: {listed}." if listed else ""


def differing_settings(beside_: Beside, source: PublishedSource) -> list[str]:
    """The settings in which a source's runs differ from ours in a row it stands beside."""
    found = {key for name in _rows_beside(beside_, source)
             for key, _, _ in beside_.settings.get((source.name, name), [])}
    return [SETTING_TEXT[k] for k in SETTING_KEYS if k in found]


def elsewhere_text(beside_: Beside, labels: dict[str, str], reached_only: bool = False) -> str:
    """The active protocol's values at other steps per task, source by source, each followed by
    ours computed the source's way where our runs reached that step (``reached_only``: only
    those the table has no column for, as the summary lists them; empty if there is none)."""
    by_source: dict[str, list[str]] = {}
    in_columns = earlier_columns(beside_) if reached_only else []
    for source, name, v in beside_.elsewhere:
        key = (source.name, name, v.steps)
        if reached_only and (key not in beside_.ours_elsewhere or (
                source in beside_.refs
                and (beside_.refs.index(source) + 1, v.steps) in in_columns)):
            continue
        spread = beside_.ranges_elsewhere.get(key) if source.runs_of(v).maybe_one else None
        ours = (f" (ours {_ours(beside_.ours_elsewhere[key])}"
                + (f", {spread[0]:.3f}–{spread[1]:.3f}" if spread else "") + ")"
                if key in beside_.ours_elsewhere else "")
        by_source.setdefault(source.name, [source.label, source.metric]).append(
            f"{labels[name]} {_number(v.value, source)} at {v.steps:,}{ours}")
    if not by_source:
        return ""
    listed = "; ".join(f"{label} ({metric} success): {', '.join(items)}"
                       for label, metric, *items in by_source.values())
    if reached_only:
        return (f"Published at earlier steps per task, with ours computed the source's way in "
                f"brackets: {listed}.")
    ranged = any(key in beside_.ranges_elsewhere for key in beside_.ours_elsewhere)
    compared = (" Where our runs reached that step, ours computed the source's way follows "
                "in brackets" + (", with our seeds' lowest and highest value where the source's "
                                 "may be one run's" if ranged else "") + "."
                if beside_.ours_elsewhere else "")
    return (f"Published under this protocol at other steps per task, so not in the table: "
            f"{listed}.{compared}")


def _shown(beside_: Beside, ref: int) -> list[tuple[str, PublishedValue]]:
    """The (experiment, value) pairs a table shows of source number ``ref``."""
    return [(name, v) for (name, _), found in beside_.cells.items() for r, v in found if r == ref]


def short_refs(beside_: Beside) -> str:
    """The shown sources in one line each (the summary's): label, metric, statistic, seeds,
    environment."""
    lines = []
    for ref, s in enumerate(beside_.refs, start=1):
        shown = [v for _, v in _shown(beside_, ref)]
        kinds = list(dict.fromkeys(s.runs_of(v).kind for v in shown)) or [s.runs.kind]
        differ = differing_settings(beside_, s)
        lines.append(
            f"[{ref}] {s.label}: {s.metric} success, {s.statistic.short}; {_seeds(s, shown)}, "
            f"{' or '.join(RUNS_TEXT[k] for k in kinds)}; {_environment(s)}; beside it ours "
            "the same way" + (", with our seeds' range" if _ranged(beside_, ref) else "")
            + (f"; its runs' {_and(differ)} differ from ours (notes under the table)"
               if differ else "") + ".")
    return "\n".join(lines)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def mentioned(beside_: Beside) -> list[PublishedSource]:
    """Every source a table's notes name."""
    out: list[PublishedSource] = []
    for source in [*beside_.refs, *(s for s, _, _ in beside_.elsewhere), *beside_.inactive]:
        if source not in out:
            out.append(source)
    return out


def sources_text(sources: list[PublishedSource]) -> str:
    """The full citation of every source the tables name, once (results.md's last section)."""
    if not sources:
        return ""
    lines = [f"- {s.label} (`{s.file}`): {s.citation}. Values obtained {_obtained(s)}: "
             f"{s.obtained.where}." for s in sources]
    return "Sources of the published values:\n\n" + "\n".join(lines) + "\n"
