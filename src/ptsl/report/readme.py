"""Keep README.md's generated parts equal to the reports. The default pipeline's block
(``<!-- results:start -->`` ... ``results:end -->``) is one line: its budget and a link to
reports/results.md, since at the small budget its tables check the pipeline rather than compare
methods. ``make repro`` runs this after ``dvc repro``; a test fails when the README is out of date.

A study's line goes between its own markers (``<!-- study NAME results:start -->`` and
``... results:end -->``) once its aggregate has run: its headline table's title and links to its
results.md (every table, figure and note), its pre-registration and its timeline where it has
them; until then what stands between them (a status line) is left as it is.

The block between ``<!-- studies contrasts:start -->`` and ``... contrasts:end -->`` sets the
studies' paired contrasts side by side (:func:`contrasts_view`): a line per contrast, a column per
study that reports it, so the same contrast reads across batch sizes (a batch x method view)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from ..cli import ArgumentParser, run
from ..core.files import write_atomic
from .markdown import SUMMARY_END, SUMMARY_START

START, END = "<!-- results:start -->", "<!-- results:end -->"
#: The README's prose width (its lines stay under 160 characters: tests/unit/test_readme.py).
WIDTH = 150


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
    text = (f"The default pipeline's tables ({m.group(1)}) check that every stage runs end to "
            "end; at that budget no method learns, so they are not results: "
            "[reports/results.md](reports/results.md).")
    return f"{START}\n{textwrap.fill(text, WIDTH, break_on_hyphens=False)}\n{END}"


def render_study(name: str, results_md: str, folder: Path) -> str:
    """Study ``name``'s README line from its reports/results.md: its headline table's title (the
    summary's first bold line, without the step it is reported at) and links to results.md,
    and to PREREGISTRATION.md and the timeline (time.png) where ``folder`` has them."""
    titles = re.findall(r"^\*\*(.+?)\*\*$", _summary(results_md, ""), re.M)
    title = re.sub(r" \(reported at [^)]*\)$", "", titles[0]) if titles else "its reports"
    links = [f"[results](studies/{name}/reports/results.md)"]
    links += [f"[{label}](studies/{name}/{file})"
              for label, file in (("pre-registration", "PREREGISTRATION.md"),
                                  ("timeline", "time.png")) if (folder / file).is_file()]
    start, end = study_markers(name)
    line = textwrap.fill(f"- `{name}`: {title}: {', '.join(links)}.", WIDTH,
                         subsequent_indent="  ", break_on_hyphens=False)
    return f"{start}\n{line}\n{end}"


CONTRASTS = ("<!-- studies contrasts:start -->", "<!-- studies contrasts:end -->")


def contrasts_view(root: Path) -> str:
    """The studies' paired contrasts side by side (between :data:`CONTRASTS`): for every
    contrast any study reports (``studies/<name>/reports/tables/*_contrasts.csv``), its mean
    difference [95% interval] and number of pairs in each study, with each study's batch and
    reward version."""
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
        columns.append((name, f"{name} (batch {params.sac.batch_size:,}, "
                              f"{params.env.reward_version} reward)"))
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
        return render_study(m["name"], results.read_text(), folder)

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
