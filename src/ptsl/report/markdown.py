"""The reports a reader opens, as markdown: each table with the sentence that says what it
reports and the notes on its published values, and ``results.md``: a summary (the headline
table of each benchmark, one line of protocol, one line of metric; what the README shows) above
every table and the sources' citations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from ..ops.params import Params, TableConfig, preset_matches
from .comparison import (METRICS, Beside, cell_text, earlier_cells, earlier_columns,
                         elsewhere_text, mentioned, notes, ours_text, short_refs, sources_text)
from .ranking import ranking_text

#: Around the summary in results.md: what the README's results block shows (readme.py).
SUMMARY_START, SUMMARY_END = "<!-- summary:start -->", "<!-- summary:end -->"

#: How each metric is measured, in a few words (docs/statistics.md says more).
METRIC_TEXT = {
    "evaluation": "evaluation success: the deterministic policy, success at any step of an "
                  "episode, mean over tasks",
    "training": "training success: the training episodes under the stochastic policy finished "
                "since the previous evaluation, success at any step, mean over tasks (empty "
                "where none finished)",
}

def budget_caption(params: Params) -> str:
    """The active budget: steps per task, seeds, batch."""
    name = params.budget if preset_matches(params) else f"{params.budget} (modified)"
    return (f"budget `{name}`: {params.train.steps:,} vector steps per task over seeds "
            f"{list(params.seeds)}; long runs to {params.train.long_steps:,} over seeds "
            f"{list(params.long_seeds)}; batch {params.sac.batch_size}")


def protocol_caption(params: Params) -> str:
    """The active protocol, named and spelled out."""
    env = params.env
    reward = f"{env.reward_version} reward functions" + (
        " divided by a running standard deviation" if env.normalize_reward else "")
    goals = ("one fixed goal per task (drawn by the seed)" if env.goals == "fixed"
             else "goals resampled from the 50 per task")
    text = (f"protocol `{params.protocol}`: Meta-World v3 tasks, {reward}, "
            f"{env.episode_length}-step episodes, {goals}, {params.train.eval_episodes} "
            "evaluation episode(s) per task")
    return text + "".join(f", {s}" for s in protocol_settings(params))


def protocol_settings(params: Params) -> list[str]:
    """The settings a researcher flips to match a published run, where they differ from the
    reference's (nothing under the reference protocol's defaults, so its captions stay)."""
    env, sac, train = params.env, params.sac, params.train
    out = []
    if env.observation == "v1":
        out.append("Meta-World v1's 12-number observation (hand, objects, goal)")
    if env.eval_ends_at_success:
        out.append("each evaluation episode ending at success")
    if train.eval_stride != 1:
        out.append(f"evaluated every {train.eval_interval:,} vector steps")
    if sac.sizes_per_task:
        out.append(f"batch {sac.batch_size} and buffer {sac.buffer_capacity:,} per task")
    if sac.q_clip is not None:
        out.append(f"Q-values clipped at ±{sac.q_clip:g}")
    return out


def table_title(params: Params, table: TableConfig) -> str:
    """The table's title with the step it actually reports."""
    return f"{table.title} (reported at {params.table_step(table):,} vector steps per task)"

def _fmt(x: Any, spec: str = ".3f") -> str:
    return "—" if pd.isna(x) else format(x, spec)


def _iqm_cell(r: Mapping[str, Any], metric: str) -> str:
    if pd.isna(r[f"{metric}_iqm"]):
        return "—"
    return (f"{r[f'{metric}_iqm']:.3f} [{r[f'{metric}_iqm_low']:.3f}, "
            f"{r[f'{metric}_iqm_high']:.3f}]")


def _mean_cell(r: Mapping[str, Any], metric: str) -> str:
    mean, std = r[f"{metric}_mean"], r[f"{metric}_std"]
    if pd.isna(mean):
        return "—"
    return (f"{mean:.3f} [{r[f'{metric}_mean_low']:.3f}, {r[f'{metric}_mean_high']:.3f}] "
            f"± {std:.3f}")


def _metric_order(params: Params) -> list[str]:
    """The headline metric first, then the other."""
    head = params.report.metric
    return [head, *[m for m in METRICS if m != head]]


def table_lines(frame: pd.DataFrame, params: Params, shown: Beside) -> str:
    """The table itself as GitHub markdown: the headline metric first; per metric the IQM over
    runs x tasks and the mean over seeds of each run's mean over tasks, each with its interval
    (and the mean's std over seeds), then, where a source published that metric, ours computed
    the source's way beside the published value (first at each earlier step our runs reached,
    :func:`~ptsl.report.comparison.earlier_columns`); last the headline's other kind (best so
    far, or final)."""
    head_metric, primary = params.report.metric, params.report.primary
    order = _metric_order(params)
    other = "best" if primary == "final" else "final"
    other_label = "best so far" if other == "best" else "final"
    with_published = [m for m in order if any(k[1] == m for k in shown.cells)]
    columns = earlier_columns(shown)
    earlier = {m: [(ref, step) for ref, step in columns if shown.refs[ref - 1].metric == m]
               for m in order}
    header, align = ["row", "parameters", "seeds"], "|---|---:|---:|"
    for m in order:
        header += [f"{m} IQM {primary} [95% CI]", f"{m} mean {primary} [95% CI] ± std"]
        align += "---|---|"
        for _, step in earlier[m]:
            header += [f"{m} at {step:,}, the source's statistic", f"published at {step:,}"]
            align += "---:|---:|"
        if m in with_published:
            header += [f"{m}, the source's statistic", "published"]
            align += "---:|---:|"
    header.append(f"{head_metric} {other_label}")
    lines = ["| " + " | ".join(header) + " |", align + "---:|"]
    for r in frame.to_dict("records"):
        cells = [r["label"], f"{r['parameters']:,}", str(r["seeds"])]
        for m in order:
            cells += [_iqm_cell(r, m), _mean_cell(r, m)]
            for ref, step in earlier[m]:
                cells += earlier_cells(shown, ref, step, r["experiment"])
            if m in with_published:
                cells += [ours_text(shown, r["experiment"], m),
                          cell_text(shown.cells.get((r["experiment"], m)), shown.refs)]
        cells.append(_fmt(r[f"{head_metric}_{other}_mean"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table_markdown(frame: pd.DataFrame, table: TableConfig, params: Params,
                   shown: Beside) -> str:
    """One table's section: its title, what it reports, the table and the notes under it that
    say where the published values come from."""
    head_metric, primary = params.report.metric, params.report.primary
    kind_text = "success at the step" if primary == "final" else "best success so far"
    labels = dict(zip(frame["experiment"], frame["label"]))
    step = int(frame["step"].iloc[0])
    seeds = params.table_seeds(table)
    intro = (f"Reported at {step:,} vector steps per task over seed(s) "
             f"{', '.join(map(str, seeds))}; "
             f"{protocol_caption(params)}. Headline: **{head_metric} success**, **{primary}** "
             f"({kind_text}). Per metric: the IQM over runs x tasks with a stratified bootstrap "
             "95% confidence interval over seeds (rliable), and the mean over seeds of each "
             "run's mean over tasks with the same bootstrap's interval ± its std over seeds; "
             "beside a published value, ours computed the way its source states (notes). "
             "Evaluation success: the deterministic policy; training success: the stochastic "
             "policy's training episodes since the previous evaluation (— where none "
             "finished).")
    findings = _findings(frame, params, shown)
    return (f"#### {table_title(params, table)}\n\n{intro}\n\n{table_lines(frame, params, shown)}"
            + (f"\n{findings}\n" if findings else "") + f"\n{notes(shown, params, labels)}")


def _findings(frame: pd.DataFrame, params: Params, shown: Beside) -> str:
    """Under a table: per metric with a published source beside it, how our rows rank against
    the source's and which intervals overlap (:func:`ptsl.report.ranking.ranking_text`)."""
    order, primary = _metric_order(params), params.report.primary
    texts = [ranking_text(frame, shown, m, primary) for m in order]
    return "\n\n".join(t for t in texts if t)


@dataclass(frozen=True)
class TableReport:
    """One table as results.md shows it: its section and figures, and what the summary
    needs."""

    name: str
    table: TableConfig
    frame: pd.DataFrame
    shown: Beside
    section: str   # table_markdown and the figure links
    curves_png: str
    contrasts: str = ""  # the paired contrasts' section (ptsl.report.contrasts), if any


def headline_tables(params: Params, reports: list[TableReport]) -> list[TableReport]:
    """The headline table of each benchmark: the first table of that benchmark in
    params.yaml's ``tables:``."""
    seen, out = set(), []
    for rep in reports:
        benchmark = params.experiments[rep.table.rows[0]].benchmark
        if benchmark not in seen:
            seen.add(benchmark)
            out.append(rep)
    return out


def summary_markdown(params: Params, reports: list[TableReport]) -> str:
    """The summary: one line of protocol, one line of metric, the headline table of each
    benchmark with a line naming the published sources beside it."""
    metric, primary = params.report.metric, params.report.primary
    parts = [f"Protocol: {protocol_caption(params)}; {budget_caption(params)}.",
             f"Metric: {METRIC_TEXT['evaluation']}; {METRIC_TEXT['training']}. Headline: "
             f"{metric} success, {primary}; per metric the IQM over runs x tasks [95% CI] and "
             "the mean over seeds of the mean over tasks [95% CI] ± std."]
    for rep in headline_tables(params, reports):
        refs = short_refs(rep.shown)
        labels = dict(zip(rep.frame["experiment"], rep.frame["label"]))
        # The paired contrasts stay in the table's section: the README sets every study's side
        # by side in a block of their own.
        extra = [x for x in (refs, _findings(rep.frame, params, rep.shown),
                             elsewhere_text(rep.shown, labels, reached_only=True)) if x]
        parts += [f"**{table_title(params, rep.table)}**",
                  table_lines(rep.frame, params, rep.shown).rstrip("\n")
                  + "".join(f"\n\n{x}" for x in extra),
                  f"![{rep.table.title} curves](figures/{rep.curves_png})"]
    return f"{SUMMARY_START}\n" + "\n\n".join(parts) + f"\n{SUMMARY_END}\n"


def results_markdown(params: Params, reports: list[TableReport], branches: str = "") -> str:
    """results.md: the summary, every table's section, the task branches' section where there
    is one (``branches``, :func:`ptsl.report.branches.branch_files`), the sources'
    citations."""
    cited: list = []
    for rep in reports:
        cited += [s for s in mentioned(rep.shown) if s not in cited]
    sections = ["Generated by the `aggregate` stage: a summary, every table, the sources of "
                "the published values.\n", summary_markdown(params, reports),
                "### Every table\n", *[rep.section for rep in reports],
                *([branches] if branches else []), sources_text(cited)]
    return "\n".join(sections)
