"""What the MLflow UI shows of the project: each experiment's note and kind, and the saved
"Compare runs" view of the runs list with the columns a reader compares runs by, for the
project's experiments and each study's (``<study>/train``...).
``python -m ptsl.ops.mlflow_ui`` (``make ui``) prints the links that open those views, with the
number of runs each holds and how many of them DVC restored (:mod:`ptsl.ops.restored`).

Nothing here reaches a pipeline output: editing a note re-runs no stage.
"""

from __future__ import annotations

import json
from pathlib import Path

# MLflow 3 marks an experiment's kind with this tag (its UI offers GenAI or model-training pages);
# the pipeline's experiments are model training. MLflow 3.17's UI follows its own GenAI /
# model-training toggle instead, which the links of `view_links` set.
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


def view_links(base_url: str = "http://127.0.0.1:5000", root: Path | None = None) -> list[str]:
    """Links that open the runs lists of the project's and the studies' training and
    evaluation experiments that hold runs, in the saved ``Compare runs`` view, each with its
    number of runs and how many DVC restored. The view's tag is set on an experiment that lacks
    it (one a stage made before the tag existed).

    ``workflowType=machine_learning`` selects the UI's model-training side: MLflow 3.17 starts
    on its GenAI side and then ignores the experiment's kind tag.
    """
    from mlflow.tracking import MlflowClient

    from .store_location import tracking_uri  # not .tracking, which imports this module

    client = MlflowClient(tracking_uri=tracking_uri(root))
    found = [e for e in client.search_experiments(max_results=1000)
             if experiment_kind(e.name) in VIEW_COLUMNS]
    # The project's first, then each study's, training before evaluation.
    found.sort(key=lambda e: ("/" in e.name, e.name.rpartition("/")[0],
                              list(VIEW_COLUMNS).index(experiment_kind(e.name))))
    links = []
    for exp in found:
        runs = _count(client, exp.experiment_id, "")
        if not runs:
            continue
        for key, value in experiment_tags(exp.name).items():
            if exp.tags.get(key) != value:
                client.set_experiment_tag(exp.experiment_id, key, value)
        restored = _count(client, exp.experiment_id, "tags.`ptsl.restored` = 'true'")
        links.append(f"{exp.name}: {base_url}/#/experiments/{exp.experiment_id}/runs"
                     f"?workflowType=machine_learning&viewStateShareKey={VIEW_ID} "
                     f"({runs} run{'s' * (runs != 1)}"
                     + (f", {restored} restored by DVC)" if restored else ")"))
    return links


def _count(client, experiment_id: str, query: str) -> int:
    """How many runs of the experiment match ``query``."""
    total, token = 0, None
    while True:
        page = client.search_runs([experiment_id], query, max_results=1000, page_token=token)
        total += len(page)
        token = page.token
        if not token:
            return total


if __name__ == "__main__":  # `make ui` prints these before starting the server
    from ..cli import ArgumentParser

    ArgumentParser(prog="python -m ptsl.ops.mlflow_ui", description=__doc__).parse_args()
    print("\n".join(view_links()) or "no training runs in the store yet: `make repro` trains "
          "them, `make pull` restores them from the DVC remote")
