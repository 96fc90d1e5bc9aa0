"""The budget switch rewrites the active keys of params.yaml from a preset, keeping comments."""

from __future__ import annotations

import shutil

import pytest
import yaml

from ptsl.ops.budget import switch
from ptsl.core.errors import ConfigError
from ptsl.ops.params import load_params, preset_matches

from ..conftest import ROOT


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", path)
    return path


def test_switch_to_paper_and_back(params_file):
    original = params_file.read_text()
    assert load_params(params_file).budget == "small" and preset_matches(load_params(params_file))
    switch(params_file, "paper")
    p = load_params(params_file)
    assert p.budget == "paper" and preset_matches(p)
    assert (p.train.steps, p.train.long_steps, p.sac.batch_size, p.sac.init_steps) == \
        (200_000, 1_000_000, 1280, 1500)
    assert p.seeds == tuple(range(1, 11)) and p.long_seeds == (1, 2, 3, 4)
    text = params_file.read_text()
    assert "# The budget switch" in text and "seeds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" in text
    switch(params_file, "small")
    assert yaml.safe_load(params_file.read_text()) == yaml.safe_load(original)
    assert params_file.read_text() == original  # a round trip leaves no diff in git


def test_unknown_budget_is_one_line_and_writes_nothing(params_file):
    before = params_file.read_text()
    with pytest.raises(ConfigError, match=r"^budget: unknown budget 'huge'; allowed: small, paper$"):
        switch(params_file, "huge")
    assert params_file.read_text() == before


def test_modified_budget_is_detected(params_file):
    text = params_file.read_text().replace("  steps: 300\n", "  steps: 450\n", 1)
    params_file.write_text(text)
    assert not preset_matches(load_params(params_file))
