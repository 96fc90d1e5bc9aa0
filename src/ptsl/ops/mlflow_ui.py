"""What the MLflow UI shows of the project: each experiment's note and kind, and the saved
"Compare runs" view of the runs list with the columns a reader compares runs by.
``python -m ptsl.ops.mlflow_ui`` (``make ui``) prints the links that open those views.

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
             "`[name]` after it is the DVC experiment that ran it.",
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


def experiment_tags(experiment: str) -> dict[str, str]:
    """The tags the project sets on MLflow experiment ``experiment``."""
    tags = dict(EXPERIMENT_KIND)
    if experiment in NOTES:
        tags["mlflow.note.content"] = NOTES[experiment]
    if experiment in VIEW_COLUMNS:
        key, value = view_tag(VIEW_COLUMNS[experiment])
        tags[key] = value
    return tags


def view_links(base_url: str = "http://127.0.0.1:5000", root: Path | None = None) -> list[str]:
    """Links that open the project's runs lists in the saved ``Compare runs`` view.

    ``workflowType=machine_learning`` selects the UI's model-training side: MLflow 3.17 starts
    on its GenAI side and then ignores the experiment's kind tag.
    """
    from mlflow.tracking import MlflowClient

    from .tracking import tracking_uri

    client = MlflowClient(tracking_uri=tracking_uri(root))
    links = []
    for name in VIEW_COLUMNS:
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            links.append(f"{name}: {base_url}/#/experiments/{exp.experiment_id}/runs"
                         f"?workflowType=machine_learning&viewStateShareKey={VIEW_ID}")
    return links


if __name__ == "__main__":  # `make ui` prints these before starting the server
    print("\n".join(view_links()) or "no training runs in the store yet: run `dvc repro` first")
