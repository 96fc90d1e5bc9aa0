"""Published numbers as data: every source file of data/published/ loads with its provenance, and
a file that lacks a field or has a malformed one is refused with one line naming the file and
the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ptsl.core.config import ExperimentConfig
from ptsl.core.errors import CorruptFileError
from ptsl.ops.paths import PUBLISHED
from ptsl.report.published import Published, load_source

from ..conftest import ROOT

FOLDER = ROOT / PUBLISHED
SOURCE = yaml.safe_load((FOLDER / "care_paper.yaml").read_text())

REQUIRED = ["label", "citation", "protocol", "metric", "statistic", "seeds", "runs", "settings",
            "steps_per_task", "obtained", "values", "runs.kind", "runs.why",
            *[f"protocol.{k}" for k in ("preset", "environment", "env_version",
                                        "reward_version", "episode_length", "goals",
                                        "evaluation")],
            "obtained.how", "obtained.where",
            *[f"statistic.{k}" for k in ("over_seeds", "run_score", "text")],
            *[f"values[0].{k}" for k in ("benchmark", "method", "steps", "value")]]


def _edit(data: dict, dotted: str, value=None, delete: bool = False) -> dict:
    """A copy of ``data`` with ``a.b`` or ``values[0].c`` set (or removed)."""
    out = copy.deepcopy(data)
    *parents, leaf = dotted.split(".")
    node = out
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index[:-1])] if index else node[name]
    if delete:
        del node[leaf]
    else:
        node[leaf] = value
    return out


def _refused(tmp_path: Path, data, says: str) -> str:
    path = tmp_path / "source.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CorruptFileError) as err:
        load_source(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: published numbers file is unreadable (")
    assert says in msg, msg
    assert "\n" not in msg and msg.endswith(f"restore it with `git checkout -- {path}`")
    return msg


def test_the_project_sources_load_with_their_provenance():
    published = Published.load(FOLDER)
    names = [s.name for s in published.sources]
    assert names == ["care_paper", "ptsl_figure", "scaling_baselines", "scaling_mt10_curves"]
    by = {s.name: s for s in published.sources}
    fig = by["ptsl_figure"]
    assert (fig.metric, fig.protocol.preset, fig.protocol.env_version) == ("training",
                                                                            "reference", "v1")
    assert fig.obtained.how == "figure" and fig.obtained.precision == 0.02
    cells = {(v.benchmark, v.method, v.steps, tuple(v.match.items())): v.value
             for v in fig.values}
    assert cells[("mt10", "care_ptsl", 200000, (("num_layers", 3),))] == 0.51
    assert cells[("mt50", "sac_ptsl", 1000000, ())] == 0.61
    assert [v.seeds for v in fig.values if v.steps == 1000000] == [4] * 10
    care = by["care_paper"]
    assert (care.metric, care.protocol.preset, care.steps_per_task) == ("evaluation",
                                                                        "reference", 2000000)
    # Each source's statistic, as the report recomputes ours beside it.
    assert {n: (s.statistic.over_seeds, s.statistic.run_score) for n, s in by.items()} == {
        "care_paper": ("mean", "best"), "ptsl_figure": ("mean", "final"),
        "scaling_baselines": ("iqm", "final"), "scaling_mt10_curves": ("iqm", "final")}
    assert {s.protocol.preset for s in published.sources} == {"reference", "metaworld-plus"}
    assert all(s.protocol.env_version == "v3" for s in published.sources
               if s.protocol.preset == "metaworld-plus")
    # Whether the seeds were separate runs (reference Q10): the PTSL launcher as published makes
    # a command's seeds one run; its MT10 MT-SAC+PTSL 1M runs most likely were.
    assert {n: s.runs.kind for n, s in by.items()} == {
        "care_paper": "separate", "ptsl_figure": "uncertain", "scaling_baselines": "separate",
        "scaling_mt10_curves": "separate"}
    fig_values = {(v.benchmark, v.method, v.steps, tuple(v.match.items())): v for v in fig.values}
    sac_ptsl_1m = fig_values[("mt10", "sac_ptsl", 1000000, ())]
    assert fig.runs_of(sac_ptsl_1m).kind == "likely one" and fig.runs_of(sac_ptsl_1m).maybe_one
    assert fig.runs_of(fig_values[("mt10", "care", 200000, ())]).kind == "uncertain"
    assert not by["care_paper"].runs.maybe_one


def test_each_source_states_its_runs_settings_and_a_value_overrides_them_key_by_key():
    by = {s.name: s for s in Published.load(FOLDER).sources}
    fig = by["ptsl_figure"]
    values = {(v.benchmark, v.method, v.steps, tuple(v.match.items())): v for v in fig.values}
    # The README's commands: batch 1,280, width 400, rank 50 on MT10...
    assert fig.settings_of(values[("mt10", "mtsac", 200000, (("task_onehot", False),))]) == {
        "hidden_dim": 400, "batch_size": 1280, "pal_dim": 50}
    # ... CARE+PTSL and MT-SAC+PTSL at their matched widths, rank 32 on MT50.
    assert fig.settings_of(values[("mt10", "care_ptsl", 200000, (("num_layers", 3),))])[
        "hidden_dim"] == 326
    assert fig.settings_of(values[("mt10", "care_ptsl", 200000, (("num_layers", 2),))])[
        "hidden_dim"] == 400
    assert fig.settings_of(values[("mt10", "sac_ptsl", 1000000, ())])["hidden_dim"] == 367
    assert fig.settings_of(values[("mt50", "sac_ptsl", 1000000, ())]) == {
        "hidden_dim": 325, "batch_size": 1280, "pal_dim": 32}
    # A null in a value's settings: not stated for it (Soft Modularization's width; the MT50
    # CARE+PTSL 200k command and configs file disagree).
    assert fig.settings_of(values[("mt10", "softmod", 200000, ())])["hidden_dim"] is None
    assert fig.settings_of(values[("mt50", "care_ptsl", 200000, (("num_layers", 3),))]) == {
        "hidden_dim": None, "batch_size": 1280, "pal_dim": None}
    # The parameter-scaling paper's multi-head run is 800 wide; the CARE paper states none.
    curves = by["scaling_mt10_curves"]
    mh = next(v for v in curves.values if v.method == "mhsac")
    assert curves.settings_of(mh) == {"hidden_dim": 800, "batch_size": 1280, "pal_dim": None}
    assert set(by["care_paper"].settings_of(by["care_paper"].values[0]).values()) == {None}


@pytest.mark.parametrize("field", REQUIRED)
def test_a_missing_field_is_named(tmp_path, field):
    _refused(tmp_path, _edit(SOURCE, field, delete=True), f"({field}: missing required key)")


@pytest.mark.parametrize("field, value, says", [
    ("metric", "train", "metric: unknown value 'train'; allowed: evaluation, training"),
    ("statistic", "mean over seeds", "statistic: expected a mapping, got 'mean over seeds'"),
    ("statistic.over_seeds", "median", "statistic.over_seeds: unknown value 'median'; allowed: "
                                       "mean, iqm"),
    ("statistic.run_score", "last", "statistic.run_score: unknown value 'last'; allowed: final, "
                                    "best"),
    ("protocol.preset", "plus", "protocol.preset: unknown value 'plus'; allowed: reference, "
                                "metaworld-plus, none"),
    ("protocol.env_version", "v4", "protocol.env_version: unknown value 'v4'"),
    ("protocol.episode_length", 0, "protocol.episode_length: must be >= 1, got 0"),
    ("seeds", "ten", "seeds: expected a number of seeds (an integer >= 1) or 'not stated', "
                     "got 'ten'"),
    ("seeds", 0, "seeds: expected a number of seeds"),
    ("steps_per_task", "2M", "steps_per_task: expected an integer, got '2M'"),
    ("citation", "", "citation: String should have at least 1 character"),
    ("protocol", None, "protocol: expected a mapping, got None"),
    ("obtained.how", "guess", "obtained.how: unknown value 'guess'"),
    ("values", [], "values: List should have at least 1 item"),
    ("values[0].value", 1.2, "values[0].value: must be a success rate in [0, 1], got 1.2"),
    ("values[0].value", "0.49", "values[0].value: must be a success rate in [0, 1], got '0.49'"),
    ("values[0].value", True, "values[0].value: must be a success rate"),
    ("values[0].method", "pcgrad", "values[0].method: unknown value 'pcgrad'"),
    ("values[0].benchmark", "mt25", "values[0].benchmark: unknown value 'mt25'"),
    ("values[0].steps", 0, "values[0].steps: must be >= 1, got 0"),
    ("values[0].match", {"width": 400}, "values[0].match.width: unknown experiment field"),
    ("values[0].match", {"num_layers": "3"}, "values[0].match.num_layers: '3' is not a value"),
    ("values[0].colour", "red", "values[0].colour: unknown key"),
    ("runs.kind", "maybe", "runs.kind: unknown value 'maybe'; allowed: separate, one, likely one, "
                           "uncertain"),
    ("runs", "separate", "runs: expected a mapping, got 'separate'"),
    ("settings", {"width": 400}, "settings.width: unknown key"),
    ("settings", {"hidden_dim": 0}, "settings.hidden_dim: must be >= 1, got 0"),
    ("values[0].settings", {"batch": 1280}, "values[0].settings.batch: unknown key"),
    ("values[0].runs", {"kind": "one"}, "values[0].runs.why: missing required key"),
    ("url", "x", "url: unknown key"),
])
def test_a_malformed_field_is_named(tmp_path, field, value, says):
    _refused(tmp_path, _edit(SOURCE, field, value), says)


def test_a_figure_needs_its_precision_and_a_cell_one_value(tmp_path):
    figure = _edit(SOURCE, "obtained.how", "figure")
    _refused(tmp_path, figure, "obtained.precision: required when values are read off a figure")
    twice = _edit(SOURCE, "values", SOURCE["values"] + SOURCE["values"][:1])
    _refused(tmp_path, twice, "values: two values for mt10 mtsac at step 2000000")


def test_not_yaml_not_a_mapping_or_named_in_the_file(tmp_path):
    _refused(tmp_path, "label: [unclosed\n", "not valid YAML")
    _refused(tmp_path, "- a list\n", "expected a mapping of the fields label, citation")
    _refused(tmp_path, _edit(SOURCE, "name", "x"), "name: unknown key (a source is named by its")
    _refused(tmp_path, _edit(SOURCE, "file", "x"), "file: unknown key (a source is named by its")


def test_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="published numbers folder not found"):
        Published.load(tmp_path / "absent")
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(SOURCE))
    assert [s.name for s in Published.load(tmp_path).sources] == ["a"]
    (tmp_path / "b.yml").write_text(yaml.safe_dump(SOURCE))
    with pytest.raises(CorruptFileError, match=r"b\.yml: .*not a \.yaml file"):
        Published.load(tmp_path)


def test_values_stand_for_the_experiments_they_match():
    published = Published.load(FOLDER)

    def found(metric: str, **exp) -> set:
        e = ExperimentConfig(**exp)
        return {(s.name, v.steps, v.value) for s, v in published.values_for(e, metric)}

    deep = found("training", benchmark="mt10", method="care_ptsl", hidden_dim=326)
    shallow = found("training", benchmark="mt10", method="care_ptsl", num_layers=2)
    assert ("ptsl_figure", 200000, 0.51) in deep and ("ptsl_figure", 200000, 0.50) not in deep
    assert shallow == {("ptsl_figure", 200000, 0.50)}
    # The reference's MT-SAC sees no task id; Meta-World+'s sees a one-hot: different rows.
    plain = found("evaluation", benchmark="mt10", method="mtsac")
    onehot = found("evaluation", benchmark="mt10", method="mtsac", task_onehot=True)
    assert plain == {("care_paper", 2000000, 0.49)}
    assert onehot == {("scaling_mt10_curves", 200000, 0.661),
                      ("scaling_mt10_curves", 1000000, 0.84)}
    assert found("training", benchmark="mt50", method="moore") == set()
    moore = found("evaluation", benchmark="mt10", method="moore")
    assert moore == {("scaling_baselines", 2000000, 0.81)}
    assert found("evaluation", benchmark="mt10", method="moore", hidden_dim=205) == set()
    # PaCo at the published runs' sizes (5 parameter sets on MT10, 20 on MT50), not at CARE's.
    assert found("evaluation", benchmark="mt10", method="paco") == {
        ("scaling_baselines", 2000000, 0.738)}
    assert found("evaluation", benchmark="mt50", method="paco", num_parameter_sets=20) == {
        ("scaling_baselines", 2000000, 0.586)}
    assert found("evaluation", benchmark="mt50", method="paco") == set()
    assert found("evaluation", benchmark="mt10", method="paco", hidden_dim=183) == set()
