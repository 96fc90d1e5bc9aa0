"""Studies: each committed study's dvc.yaml is the project's with the shared paths rewritten; a
new study starts from another's params; a matched row no width can match is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ptsl.core.errors import ConfigError
from ptsl.ops import study
from ptsl.ops.params import load_params
from ptsl.ops.validate import check_matched_sizes, trained_experiments

from ..conftest import ROOT


def test_every_committed_study_is_in_sync_with_the_project():
    project = (ROOT / "dvc.yaml").read_text()
    folders = study.study_dirs(ROOT)
    assert [f.name for f in folders] == ["mt10-b1280", "mt10-b1280-v2", "mt10-cpu"]
    for folder in folders:
        expected = study.study_dvc_yaml(project, versus=study.versus_studies(folder))
        assert (folder / "dvc.yaml").read_text() == expected, \
            f"{folder}/dvc.yaml is stale: run `python -m ptsl.ops.study sync`"
        # The aggregate reads the branches_ptsl stages' folder: in git, as the project's.
        assert (folder / "data" / "branches" / ".gitignore").is_file(), \
            f"{folder}/data/branches/.gitignore is missing: run `python -m ptsl.ops.study sync`"
        validated = load_params(folder / "params.yaml")
        assert validated.trained  # a study's params follow the project's schema


def test_the_study_pipeline_calls_the_projects_code_and_keeps_its_own_data():
    spec = yaml.safe_load(study.study_dvc_yaml((ROOT / "dvc.yaml").read_text()))
    project = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    assert list(spec["stages"]) == list(project["stages"])
    train = spec["stages"]["train"]
    assert train["cmd"].startswith("python ../../pipeline/train.py ")
    assert "../../src/ptsl/core" in train["deps"] and "data/validated.json" in train["deps"]
    assert train["outs"] == project["stages"]["train"]["outs"]  # the study's own data/runs
    deps = spec["stages"]["aggregate"]["deps"]
    assert "../../data/published" in deps and "data/runs" in deps and "data/eval" in deps
    # A study whose table sets its rows beside another study's depends on that study's runs.
    versus = yaml.safe_load(study.study_dvc_yaml((ROOT / "dvc.yaml").read_text(),
                                                 versus=("mt10-b1280",)))
    assert versus["stages"]["aggregate"]["deps"] == deps + [
        "../../studies/mt10-b1280/reports/data/runs.csv"]


def test_shared_paths_from_a_study_folder_reach_the_project(tmp_path):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    folder = tmp_path / "studies" / "mine"
    folder.mkdir(parents=True)
    assert study.study_of(folder) == (tmp_path.resolve(), "mine")
    shared = study.shared_path(Path("data/published"), folder)
    assert shared == folder / "../../data/published"  # relative: reports show it
    assert shared.resolve() == tmp_path.resolve() / "data/published"
    assert study.shared_path(Path("data/published"), Path(".")) == Path("data/published")
    assert study.shared_path(Path("data/published"), tmp_path) == tmp_path / "data/published"
    assert study.study_of(tmp_path) is None


def test_new_study_copies_params_and_refuses_bad_names(tmp_path):
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    src = tmp_path / "studies" / "mt10-cpu"
    src.mkdir(parents=True)
    (src / "params.yaml").write_text((ROOT / "studies/mt10-cpu/params.yaml").read_text())
    made = study.new(tmp_path, "mine", "mt10-cpu")
    assert (made / "params.yaml").read_text() == (src / "params.yaml").read_text()
    for folder in (made, src):  # new() brings every study's dvc.yaml and stamp up to date
        assert (folder / "dvc.yaml").is_file() and (folder / "data/validated.json").is_file()
        assert (folder / "data/branches/.gitignore").is_file()
    assert study.sync(tmp_path) == []
    with pytest.raises(ConfigError, match=r"^study name 'My Study' is not allowed"):
        study.new(tmp_path, "My Study", "mt10-cpu")
    with pytest.raises(ConfigError, match=r"already exists"):
        study.new(tmp_path, "mine", "mt10-cpu")
    with pytest.raises(ConfigError, match=r"^--from: unknown study 'nope'; allowed: mine, mt10-cpu$"):
        study.new(tmp_path, "other", "nope")


def test_a_matched_row_no_width_can_match_is_refused_in_one_line(tmp_path):
    raw = yaml.safe_load((ROOT / "studies/mt10-cpu/params.yaml").read_text())
    params = load_params(ROOT / "studies/mt10-cpu/params.yaml")
    check_matched_sizes(params, trained_experiments(params))  # the study as committed matches
    raw["pal_dim"] = 50  # PTSL's paper rank: its projections alone outgrow CARE at width 128
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(tmp_path / "params.yaml")
    with pytest.raises(ConfigError) as err:
        check_matched_sizes(params, trained_experiments(params))
    msg = str(err.value)
    assert msg.startswith("experiments.mt10_care_ptsl.hidden_dim: no width matches "
                          "experiments.mt10_care's 303,878 parameters: at hidden_dim 50 ")
    assert "\n" not in msg and "lower pal_dim" in msg
