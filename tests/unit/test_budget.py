"""The budget and protocol switches rewrite the active keys of params.yaml from a preset, keeping
comments; validation checks the active keys against the named protocol."""

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
    # (not train.steps: 450 is no multiple of the metaworld-plus preset's evaluation interval)
    text = params_file.read_text().replace("  init_steps: 150\n", "  init_steps: 100\n", 1)
    params_file.write_text(text)
    assert not preset_matches(load_params(params_file))


def test_switch_protocol_and_back(params_file):
    """The protocol switch writes Meta-World+'s preset into the active keys and back, byte for
    byte; the budget stays as it was."""
    from ptsl.ops.protocol import switch as switch_protocol

    original = params_file.read_text()
    assert load_params(params_file).protocol == "reference"
    switch_protocol(params_file, "metaworld-plus")
    p = load_params(params_file)
    assert p.protocol == "metaworld-plus" and p.budget == "small" and preset_matches(p)
    assert (p.env.episode_length, p.env.goals, p.env.reward_version, p.env.normalize_reward,
            p.train.eval_episodes, p.evaluate.episodes) == (500, "resample", "v2", False, 50, 50)
    switch_protocol(params_file, "reference")
    assert params_file.read_text() == original


def test_a_key_that_is_not_the_named_protocols_is_one_line_unless_custom(params_file):
    text = params_file.read_text().replace("  reward_version: v1 ", "  reward_version: v2 ", 1)
    params_file.write_text(text)
    with pytest.raises(ConfigError, match=r"^env\.reward_version: 'v2', but protocol reference "
                                          r"sets 'v1'; switch with `python -m ptsl\.ops\.protocol "
                                          r"reference`, or set `protocol: custom`"):
        load_params(params_file)
    params_file.write_text(text.replace("\nprotocol: reference\n", "\nprotocol: custom\n", 1))
    assert load_params(params_file).env.reward_version == "v2"
    params_file.write_text(text.replace("\nprotocol: reference\n", "\nprotocol: plus\n", 1))
    with pytest.raises(ConfigError, match=r"^protocol: unknown protocol 'plus'; allowed: "
                                          r"reference, metaworld-plus, custom$"):
        load_params(params_file)


def test_a_key_in_a_budget_and_a_protocol_is_refused(params_file):
    raw = yaml.safe_load(params_file.read_text())
    raw["protocols"]["reference"]["train.steps"] = 300
    from ptsl.ops.params import parse_params

    with pytest.raises(ConfigError, match=r"^protocols\.reference\.train\.steps: budget 'small' "
                                          r"sets it too"):
        parse_params(raw)
