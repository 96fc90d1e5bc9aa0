"""What the MLflow UI shows of the project: each experiment's note and kind, and the saved
"Compare runs" view of the runs list with the columns a reader compares runs by, for the
project's experiments and each study's (``<study>/train``...).
``python -m ptsl.ops.mlflow_ui`` prints the links that open those views, with the number of
runs each holds and how many of them DVC restored (:mod:`ptsl.ops.restored`), after setting
these tags on every project experiment of the store that lacks them; with ``--serve`` (``make
ui``) it then serves the UI and, once it answers, prints the link to open first
(:mod:`ptsl.ops.ui_server`).

Nothing here reaches a pipeline output: editing a note re-runs no stage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# MLflow 3 marks an experiment's kind with this tag (its UI offers GenAI or model-training pages);
# the pipeline's experiments are model training. MLflow 3.17's UI lays every page out by its
# own GenAI / model-training toggle instead (remembered by the browser, GenAI at first), which
# the links of `view_links` set to model training (`workflowType=machine_learning`).
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
# A saved view of the runs list ("Views" menu of the UI, or ?viewStateShareKey=compare): MLflow
# stores views as experiment tags `mlflow.sharedViewState.<id>` holding a JSON envelope.
VIEW_ID = "compare"
VIEW_COLUMNS = {
    "train": ["params.`method`", "params.`benchmark`", "params.`seed`", "params.`pal_dim`",
              "metrics.`final_success`", "metrics.`parameter_count`"],
    "evaluate": ["params.`method`", "params.`benchmark`", "params.`seed`", "params.`pal_dim`",
                 "metrics.`success`", "metrics.`parameter_count`"],
}
NOTES = {
    "check_env": "Stage check_env: library versions, torch device, per-benchmark checks.",
    # Markdown: angle brackets would be read as an HTML tag and vanish from the page.
    "train": "One run per DVC training stage, named `experiment-seed` (`mt10_mtsac-1`); a "
             "`[name]` after it is the DVC experiment that ran it. A run tagged "
             "`ptsl.restored` was not trained against this store: DVC restored its outputs "
             "(from its cache or a remote) and `python -m ptsl.ops.restored` logged them.",
    "evaluate": "One run per DVC evaluation stage: per-task success (and rollout GIFs).",
    "aggregate": "The paper's tables, figures, metrics and plot data.",
}


def view_tag(columns: list[str]) -> tuple[str, str]:
    """The experiment tag of the saved runs view that shows ``columns``."""
    # Source is the run's DVC stage (tag mlflow.source.name), Version its git commit.
    state = {"selectedColumns": ["attributes.`Source`", "attributes.`Version`", *columns],
             "orderByKey": "attributes.start_time", "orderByAsc": False}
    envelope = {"name": "Compare runs", "createdAt": 0, "updatedAt": 0,
                "state": json.dumps(state)}
    return f"mlflow.sharedViewState.{VIEW_ID}", json.dumps(envelope)


def experiment_kind(experiment: str) -> str:
    """The stage kind of MLflow experiment ``experiment``: ``train`` for ``train`` and for a
    study's ``mt10-cpu/train``."""
    return experiment.rpartition("/")[2]


def experiment_tags(experiment: str) -> dict[str, str]:
    """The tags the project sets on MLflow experiment ``experiment`` (a study's experiments
    get those of their kind)."""
    tags = dict(EXPERIMENT_KIND)
    kind = experiment_kind(experiment)
    if kind in NOTES:
        tags["mlflow.note.content"] = NOTES[kind]
    if kind in VIEW_COLUMNS:
        key, value = view_tag(VIEW_COLUMNS[kind])
        tags[key] = value
    return tags


def tag_experiments(client: Any) -> list[Any]:
    """Set the project's tags (:func:`experiment_tags`) on every experiment of the store that
    a stage of the project or a study makes (``train``, ``mt10-cpu/train``, ``check_env``...)
    and lacks them (made before a tag existed); returns those experiments, updated."""
    found = []
    for exp in client.search_experiments(max_results=1000):
        if experiment_kind(exp.name) not in NOTES:
            continue  # MLflow's Default, or one the project did not make
        for key, value in experiment_tags(exp.name).items():
            if exp.tags.get(key) != value:
                client.set_experiment_tag(exp.experiment_id, key, value)
        found.append(client.get_experiment(exp.experiment_id))
    return found


def runs_link(base_url: str, experiment_id: str) -> str:
    """The address of an experiment's runs list in the saved ``Compare runs`` view, on the UI's
    model-training side (``workflowType=machine_learning``)."""
    return (f"{base_url}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={VIEW_ID}")


@dataclass
class Links:
    """What ``make ui`` prints: a line per experiment with runs, and the experiment to open
    first (the training experiment with the newest run; None without one)."""

    lines: list[str]
    first: tuple[str, str] | None  # (experiment name, link)


def view_links(base_url: str = "http://127.0.0.1:5000", root: Path | None = None) -> Links:
    """Links that open the runs lists of the project's and the studies' training and
    evaluation experiments that hold runs, each with its number of runs and how many DVC
    restored; first :func:`tag_experiments` on the store."""
    from mlflow.tracking import MlflowClient

    from .store_location import tracking_uri  # not .tracking, which imports this module

    client = MlflowClient(tracking_uri=tracking_uri(root))
    found = [e for e in tag_experiments(client) if experiment_kind(e.name) in VIEW_COLUMNS]
    # The project's first, then each study's, training before evaluation.
    found.sort(key=lambda e: ("/" in e.name, e.name.rpartition("/")[0],
                              list(VIEW_COLUMNS).index(experiment_kind(e.name))))
    lines: list[str] = []
    newest: tuple[int, tuple[str, str]] | None = None  # (its newest run's start, the link)
    for exp in found:
        runs = _count(client, exp.experiment_id, "")
        if not runs:
            continue
        restored = _count(client, exp.experiment_id, "tags.`ptsl.restored` = 'true'")
        link = runs_link(base_url, exp.experiment_id)
        lines.append(f"{exp.name}: {link} ({runs} run{'s' * (runs != 1)}"
                     + (f", {restored} restored by DVC)" if restored else ")"))
        if experiment_kind(exp.name) == "train":
            last = client.search_runs([exp.experiment_id], max_results=1,
                                      order_by=["attributes.start_time DESC"])[0]
            if newest is None or last.info.start_time > newest[0]:
                newest = (last.info.start_time, (exp.name, link))
    return Links(lines, newest[1] if newest else None)


def ready_lines(links: Links, base_url: str) -> list[str]:
    """What ``make ui`` prints once the UI answers at ``base_url``."""
    if links.first is None:
        return [f"MLflow UI at {base_url} (Ctrl-C stops it): no training runs in the store yet"]
    name, link = links.first
    return [f"MLflow UI at {base_url} (Ctrl-C stops it); the newest training runs, {name}, on "
            "its Model training side:", f"  {link}"]


def _count(client, experiment_id: str, query: str) -> int:
    """How many runs of the experiment match ``query``."""
    total, token = 0, None
    while True:
        page = client.search_runs([experiment_id], query, max_results=1000, page_token=token)
        total += len(page)
        token = page.token
        if not token:
            return total


NO_RUNS = ("no training runs in the store yet: `make repro` trains them, `make pull` restores "
           "them from the DVC remote")


def main(argv: list[str] | None = None) -> int:
    from ..cli import ArgumentParser, whole
    from .store_location import tracking_uri
    from .ui_server import check_port, serve

    ap = ArgumentParser(prog="python -m ptsl.ops.mlflow_ui", description=__doc__)
    ap.add_argument("--serve", action="store_true",
                    help="then serve the UI (mlflow ui) on the project's store until Ctrl-C")
    ap.add_argument("--port", type=whole(1, 65535), default=5000,
                    help="the UI's port on 127.0.0.1 (default: %(default)s)")
    args = ap.parse_args(argv)
    uri = tracking_uri()
    server = uri.startswith(("http://", "https://"))  # a tracking server serves its own UI
    base = uri.rstrip("/") if server else f"http://127.0.0.1:{args.port}"
    if args.serve and not server:
        check_port("127.0.0.1", args.port)  # before anything is printed
    links = view_links(base)
    print("\n".join(links.lines) or NO_RUNS, flush=True)
    if not args.serve:
        return 0
    if server:
        print(f"MLFLOW_TRACKING_URI={uri}: that server serves the UI; nothing started")
        return 0
    return serve(uri, "127.0.0.1", args.port, lambda url: ready_lines(links, url))


if __name__ == "__main__":
    from ..cli import run

    run(main)
