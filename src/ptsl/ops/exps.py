"""DVC experiments side by side, a line per table row: ``python -m ptsl.ops.exps``
(``make exps``).

``dvc exp show`` gives every experiment a row and every metric a column; with a headline per
table row and a file per row, DVC names each column ``reports/metrics/<row>.json:short``, so the
24 headlines of the paper's tables alone take about 1,000 columns. This view turns the table round: a
column per experiment (the workspace, the commit and the experiments run from it), a line per
param that differs between them, then a line per table row with its headline number (the
primary metric's mean over seeds at the table's step, ``reports/metrics/<row>.json``). It reads
``dvc exp show --json``, so it shows exactly what DVC holds, queued and failed runs included.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..cli import ArgumentParser, whole
from ..core.errors import ConfigError
from .paths import REPORTS
from .stage import run_stage
from .tracking import flatten

PARAMS_FILE = "params.yaml"
METRICS_DIR = (REPORTS / "metrics").as_posix()
#: params that are bookkeeping for the view, not knobs an experiment turns.
NOT_KNOBS = ("budgets.", "tables.", "runs.")


@dataclass(frozen=True)
class Column:
    """One experiment as DVC records it: its name, flattened params and metrics files."""

    name: str
    params: Mapping[str, Any]
    metrics: Mapping[str, Mapping[str, Any]]
    state: str = ""          # "", or why it holds no numbers (queued, running, failed)


def _column(name: str, data: Mapping[str, Any] | None, error: Any, status: str = "") -> Column:
    data = data or {}
    params = (data.get("params") or {}).get(PARAMS_FILE, {}).get("data") or {}
    metrics = {path: m.get("data") or {} for path, m in (data.get("metrics") or {}).items()}
    state = "" if status.lower() in ("", "success") else status.lower()
    if error and not state:
        state = "failed"
    if not data and not state:
        state = "no data"
    return Column(name, params, metrics, state)


def _short(rev: Any) -> str:
    """A commit's 7-character hash; ``workspace`` and other names as they are."""
    text = str(rev or "?")
    return text[:7] if len(text) == 40 else text


def columns_from_json(shown: Sequence[Mapping[str, Any]]) -> list[Column]:
    """The columns of ``dvc exp show --json``: the workspace, each commit, its experiments."""
    cols: list[Column] = []
    for entry in shown:
        name = entry.get("name") or _short(entry.get("rev"))
        cols.append(_column(name, entry.get("data"), entry.get("error")))
        for exp in entry.get("experiments") or []:
            revs = exp.get("revs") or []
            head = revs[0] if revs else {}
            exp_name = exp.get("name") or head.get("name") or _short(head.get("rev"))
            executor = exp.get("executor") or {}
            status = executor.get("state", "") if isinstance(executor, Mapping) else ""
            cols.append(_column(exp_name, head.get("data"), head.get("error"), status))
    return cols


def read_columns(project: Path) -> list[Column]:
    """Run ``dvc exp show --json`` in ``project`` and return its columns."""
    exe = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
    proc = subprocess.run([exe, "exp", "show", "--json"], cwd=project, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"{project}: `dvc exp show --json` failed: {last}")
    try:
        return columns_from_json(json.loads(proc.stdout))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{project}: `dvc exp show --json` printed no JSON ({exc})") from exc


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.4g}"
    text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return text if len(text) <= 12 else text[:11] + "…"


def _table_lines(cols: Sequence[Column], tables: Mapping[str, Any], labels: Mapping[str, str],
                 only_changed: bool) -> tuple[list[tuple[str, list[str]]], int]:
    """Each table's title line and its rows' headline numbers (``only_changed``: the rows whose
    numbers differ, and the titles of tables with such a row); also how many rows are shown."""
    body: list[tuple[str, list[str]]] = []
    shown_rows = 0
    for tname, table in tables.items():
        at = table.get("at", "short")
        lines = []
        for row in table.get("rows", []):
            values = [c.metrics.get(f"{METRICS_DIR}/{row}.json", {}).get(at) for c in cols]
            if only_changed and len({json.dumps(v) for v in values}) == 1:
                continue
            lines.append((f"  {labels.get(row, row)}", [_fmt(v) for v in values]))
        shown_rows += len(lines)
        if lines or not only_changed:
            body.append((f"{table.get('title', tname)} [{tname}]", []))
            body += lines
    return body, shown_rows


def render(cols: Sequence[Column], only_changed: bool = False, width: int = 120) -> str:
    """The side-by-side view as text; tables and row labels come from the first column with
    params (the workspace). ``only_changed`` keeps the table rows whose numbers differ."""
    base = next((c for c in cols if c.params), None)
    if base is None:
        raise ConfigError(f"{PARAMS_FILE}: no experiment holds params; is this a DVC project?")
    tables = base.params.get("tables") or {}
    labels = {name: (exp or {}).get("label") or name
              for name, exp in (base.params.get("experiments") or {}).items()}
    flat = [flatten(c.params) for c in cols]
    keys = sorted({k for f in flat for k in f if not k.startswith(NOT_KNOBS)})
    # Columns without data (queued, failed) show "-" but do not make every param look changed.
    held = [f for f, c in zip(flat, cols) if c.params]
    changed = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in held}) > 1]

    body: list[tuple[str, list[str]]] = [("changed params" if changed else
                                          "no param differs between these columns", [])]
    body += [(f"  {k}", [_fmt(f.get(k)) for f in flat]) for k in changed]
    table_lines, shown_rows = _table_lines(cols, tables, labels, only_changed)
    body += table_lines

    names = [c.name + (f" ({c.state})" if c.state else "") for c in cols]
    widths = [max(6, len(n), *(len(vals[i]) for _, vals in body if vals)) + 2
              for i, n in enumerate(names)]
    labels_w = max((len(label) for label, vals in body if vals), default=20)
    first = max(20, min(labels_w, width - sum(widths)))
    out = [" " * first + "".join(f"{n:>{w}}" for n, w in zip(names, widths))]
    for label, vals in body:
        if not vals:
            out.append(label)
            continue
        shown = label if len(label) <= first else label[:first - 1] + "…"
        out.append(f"{shown:<{first}}" + "".join(f"{v:>{w}}" for v, w in zip(vals, widths)))
    if not shown_rows:
        out.append("no table row's number differs between these columns")
    if first + sum(widths) > width:
        out.append(f"wider than {width} columns: pick the columns to compare with --exp NAME")
    out.append(f"numbers: {METRICS_DIR}/<row>.json, the primary metric's mean over seeds at the "
               "table's step")
    return "\n".join(line.rstrip() for line in out)


def main(argv: Sequence[str] | None = None) -> None:
    ap = ArgumentParser(prog="python -m ptsl.ops.exps",
                                 description="DVC experiments side by side: a column per "
                                             "experiment, a line per changed param and per table "
                                             "row with its headline number.",
                                 epilog="Columns: the workspace, then each commit `dvc exp show` "
                                        "lists with the experiments run from it.")
    ap.add_argument("--only-changed", action="store_true",
                    help="show only the table rows whose headline differs between columns")
    ap.add_argument("--exp", action="append", metavar="NAME",
                    help="show only this column (repeat it to compare several; names as printed: "
                         "workspace, a branch or commit, an experiment)")
    ap.add_argument("--project", type=Path, default=Path("."),
                    help="project root holding dvc.yaml and params.yaml (default: .)")
    ap.add_argument("--width", type=whole(1), default=shutil.get_terminal_size((120, 24)).columns,
                    help="terminal width the row labels are cut to (default: the terminal's)")
    args = ap.parse_args(argv)
    if not (args.project / "dvc.yaml").is_file():
        raise ConfigError(f"{args.project / 'dvc.yaml'}: not found; run from the project root "
                          "or pass --project")
    cols = read_columns(args.project)
    if args.exp:
        known = {c.name: c for c in cols}
        unknown = [n for n in args.exp if n not in known]
        if unknown:
            raise ConfigError(f"--exp {unknown[0]}: no such column; allowed: {', '.join(known)}")
        cols = [known[n] for n in args.exp]
    print(render(cols, args.only_changed, args.width))


if __name__ == "__main__":
    run_stage(main)
