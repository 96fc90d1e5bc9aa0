"""Keep README.md's generated parts equal to the reports. The default pipeline's block
(``<!-- results:start -->`` ... ``results:end -->``) is one line: its budget and a link to
reports/results.md, since at the small budget its tables check the pipeline rather than compare
methods. ``make repro`` runs this after ``dvc repro``; a test fails when the README is out of date.

A study's summary goes between its own markers (``<!-- study NAME results:start -->`` and
``... results:end -->``) from ``studies/NAME/reports/results.md`` once its aggregate has run
(its tables and notes; the protocol and metric lines stay in results.md, linked from the title),
with a line on how long it took from ``studies/NAME/time.json`` where there is one; until then
what stands between them (a status line) is left as it is.

The block between ``<!-- studies contrasts:start -->`` and ``... contrasts:end -->`` sets the
studies' paired contrasts side by side (:func:`contrasts_view`): a line per contrast, a column per
study that reports it, so the same contrast reads across batch sizes (a batch x method view)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Mapping

from ..cli import ArgumentParser, run
from ..core.files import write_atomic
from .markdown import SUMMARY_END, SUMMARY_START

START, END = "<!-- results:start -->", "<!-- results:end -->"


def study_markers(name: str) -> tuple[str, str]:
    """The README markers of study ``name``'s block."""
    return f"<!-- study {name} results:start -->", f"<!-- study {name} results:end -->"


STUDY_BLOCK = re.compile(r"<!-- study (?P<name>[A-Za-z0-9_.-]+) results:start -->.*?"
                         r"<!-- study (?P=name) results:end -->", re.S)


def _summary(results_md: str, reports_prefix: str) -> str:
    """results.md's summary with its relative links pointing into ``reports_prefix``."""
    i, j = results_md.find(SUMMARY_START), results_md.find(SUMMARY_END)
    if i < 0 or j < i:
        raise ValueError(f"results.md has no {SUMMARY_START} ... {SUMMARY_END} block; run "
                         "`dvc repro` to rebuild it")
    summary = results_md[i + len(SUMMARY_START):j].strip()
    return re.sub(r"\]\((?!https?:)([^)]+)\)", lambda m: f"]({reports_prefix}{m.group(1)})",
                  summary)


def render(results_md: str, reports_prefix: str = "reports/",
           markers: tuple[str, str] = (START, END)) -> str:
    """The README block: results.md's summary with its relative links pointing into
    ``reports_prefix``, and a link to every table, between ``markers``."""
    full = f"{reports_prefix}results.md"
    return (f"{markers[0]}\n{_summary(results_md, reports_prefix)}\n\nEvery table with its "
            f"notes, figures and the sources of the published values: [{full}]({full}).\n"
            f"{markers[1]}")


def render_check(results_md: str) -> str:
    """The README's line on the default pipeline (between :data:`START` and :data:`END`): its
    budget, read from results.md's protocol line, and that its tables check the pipeline (no
    method learns at the small budget), with a link to them."""
    m = re.search(r"; (budget `[^`]+`: [^;]+); ", results_md)
    if m is None:
        raise ValueError("results.md has no budget in its protocol line; run `dvc repro` to "
                         "rebuild it")
    return (f"{START}\nThe default pipeline's tables ({m.group(1)}) check that every stage runs "
            "end to end; at that budget no method learns, so they are not results: "
            f"[reports/results.md](reports/results.md).\n{END}")


def time_line(name: str, record: Mapping[str, Any], figure: bool = False) -> str:
    """One sentence from a study's time record (``python -m ptsl.tools.study_time NAME``, its
    studies/NAME/time.json; ``figure``: its timeline, time.png, is there too): training time
    in all and per run, wall time, runs at once."""
    done = sorted(s["seconds"] / 60 for s in record["train"] if s["finished"])
    if not done:
        return ""
    elsewhere = len(record["training_runs_not_in_store"])
    per_run = (f"{done[0]:.0f} to {done[-1]:.0f} min per run, median "
               f"{statistics.median(done):.0f}")
    links = f"[time.json](studies/{name}/time.json)" + (
        f", [timeline](studies/{name}/time.png)" if figure else "")
    return (f"How long it took ({links}, from the MLflow store): "
            f"{len(done)} training runs, {record['training_seconds'] / 3600:.1f} h of training "
            f"({per_run}; killed attempts and the steps a resume repeats included), "
            f"{record['wall_seconds'] / 3600:.1f} h of wall time from the first start to the last "
            f"end, pauses included, at most {record['most_training_runs_at_once']} runs at once "
            f"with {', '.join(record['threads_per_run'])} torch thread(s) each"
            + (f"; {elsewhere} more run(s) logged to another store" if elsewhere else "") + ".")


#: The summary's paragraphs a study's README block leaves to its results.md: the protocol and
#: the metric, a long line each, the same words for every study.
_LEFT_TO_RESULTS = ("Protocol: ", "Metric: ")


def render_study(name: str, results_md: str, time_record: Mapping[str, Any] | None = None,
                 timeline: bool = False) -> str:
    """Study ``name``'s README block from its reports/results.md: each headline table under its
    title, which names the study and links results.md (protocol, metric, every table), with
    the table's notes and figure, and one line from its time record where it has one (and a
    link to its timeline figure where ``timeline``)."""
    prefix = f"studies/{name}/reports/"
    full = f"{prefix}results.md"
    parts = [p for p in _summary(results_md, prefix).split("\n\n")
             if not p.startswith(_LEFT_TO_RESULTS)]
    link = f"protocol, metric and every table: [{full}]({full})"
    titled = [f"Study `{name}`: {p} ({link})" if re.fullmatch(r"\*\*[^\n]+\*\*", p) else p
              for p in parts]
    if titled == parts:  # no headline table: the link on a line of its own
        titled.append(f"Study `{name}`: {link}.")
    parts = titled
    line = time_line(name, time_record, timeline) if time_record else ""
    start, end = study_markers(name)
    return f"{start}\n" + "\n\n".join(parts + ([line] if line else [])) + f"\n{end}"


def study_time_record(folder: Path) -> dict[str, Any] | None:
    """A study folder's time.json, or None where the study has none."""
    path = folder / "time.json"
    return json.loads(path.read_text()) if path.is_file() else None


CONTRASTS = ("<!-- studies contrasts:start -->", "<!-- studies contrasts:end -->")


def contrasts_view(root: Path) -> str:
    """The studies' paired contrasts side by side (between :data:`CONTRASTS`): for every
    contrast any study reports (``studies/<name>/reports/tables/*_contrasts.csv``), its mean
    difference [95% interval] and number of pairs in each study, with each study's batch and a
    link to its contrasts figure where the aggregate drew one."""
    import pandas as pd

    from ..ops.params import load_params
    from .contrasts import contrast_groups

    columns: list[tuple[str, str]] = []
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for folder in sorted((root / "studies").glob("*/reports/tables")):
        name = folder.parent.parent.name
        files = sorted(folder.glob("*_contrasts.csv"))
        if not files:
            continue
        params = load_params(folder.parent.parent / "params.yaml")
        # Each table's contrasts figure (the aggregate's figures/<table>_contrasts.png).
        figures = [f"[figure](studies/{name}/reports/figures/{path.stem}.png)" for path in files
                   if (folder.parent / "figures" / f"{path.stem}.png").is_file()]
        columns.append((name, f"{name} (batch {params.sac.batch_size:,}"
                              + "".join(f"; {f}" for f in figures) + ")"))
        for path in files:
            for label, minus, g in contrast_groups(path):
                r = g.iloc[0]
                mark = " (primary)" if bool(r["primary"]) else ""
                interval = ("no interval" if pd.isna(r["ci_low"])
                            else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]")
                cells.setdefault((label, minus), {})[name] = (
                    f"{r['mean']:+.3f} {interval}, {len(g)} pair(s){mark}")
    if not cells:
        return f"{CONTRASTS[0]}\nNo study reports a paired contrast yet.\n{CONTRASTS[1]}"
    lines = ["| contrast (paired by seed) | " + " | ".join(c for _, c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for (label, minus), by_study in cells.items():
        lines.append(f"| {label} − {minus} | "
                     + " | ".join(by_study.get(n, "—") for n, _ in columns) + " |")
    return f"{CONTRASTS[0]}\n" + "\n".join(lines) + f"\n{CONTRASTS[1]}"


def with_contrasts(readme: str, root: Path) -> str:
    """``readme`` with its contrasts block (where it has the markers) rendered from the
    studies' reports."""
    i, j = readme.find(CONTRASTS[0]), readme.find(CONTRASTS[1])
    if i < 0 or j < i:
        return readme
    return readme[:i] + contrasts_view(root) + readme[j + len(CONTRASTS[1]):]


def with_studies(readme: str, root: Path) -> str:
    """``readme`` with every study block whose study has a reports/results.md rendered from it."""
    def block(m: re.Match) -> str:
        folder = root / "studies" / m["name"]
        results = folder / "reports" / "results.md"
        if not results.is_file():
            return m[0]
        return render_study(m["name"], results.read_text(), study_time_record(folder),
                            (folder / "time.png").is_file())

    return STUDY_BLOCK.sub(block, readme)


def embedded(readme: str) -> str:
    """The current block in the README (markers included)."""
    i, j = readme.find(START), readme.find(END)
    if i < 0 or j < i:
        raise ValueError(f"README.md has no {START} ... {END} block")
    return readme[i:j + len(END)]


def update(readme_path: Path = Path("README.md"),
           results_path: Path = Path("reports/results.md")) -> bool:
    """Rewrite the README block; returns whether anything changed."""
    if not results_path.is_file():
        raise FileNotFoundError(f"{results_path} is missing; run `dvc repro` first")
    readme = readme_path.read_text()
    new = readme.replace(embedded(readme), render_check(results_path.read_text()))
    new = with_studies(new, readme_path.resolve().parent)
    new = with_contrasts(new, readme_path.resolve().parent)
    if new != readme:
        write_atomic(readme_path, new, "README")
    return new != readme


def main(argv: list[str] | None = None) -> int:
    """``python -m ptsl.report.readme [--readme FILE] [--results FILE]``: rewrite the README's
    generated blocks from the reports."""
    ap = ArgumentParser(prog="python -m ptsl.report.readme", description=__doc__)
    ap.add_argument("--readme", type=Path, default=Path("README.md"),
                    help="the README whose blocks are rewritten (default: %(default)s)")
    ap.add_argument("--results", type=Path, default=Path("reports/results.md"),
                    help="the default pipeline's results (default: %(default)s)")
    args = ap.parse_args(argv)
    if not args.readme.is_file():
        raise FileNotFoundError(f"{args.readme}: no such file; run this from the project root "
                                "or name the README with --readme")
    changed = update(args.readme, args.results)
    print(f"{args.readme} results {'updated' if changed else 'already current'}")
    return 0


if __name__ == "__main__":
    # ValueError: a README without its block markers (embedded), said in one line.
    run(main, (ValueError,))
