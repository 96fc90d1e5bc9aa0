"""Config validation: one clear error naming the key and what is allowed; no output written."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from ptsl import make_config
from ptsl.core.errors import ConfigError
from ptsl.core.methods import METHODS
from ptsl.core.config import (ExperimentConfig, check_pal_dim, check_top_pal_dim,
                              reads_top_pal_dim)
from ptsl.ops.params import parse_params, run_config, stage_group

from ..conftest import ROOT


def test_project_params_are_valid(raw_params):
    params = parse_params(raw_params)
    for name in params.runs.plain + params.runs.ptsl:
        cfg = run_config(params, name, params.seeds[0])
        assert cfg.key() == run_config(params, name, params.seeds[0]).key()


@pytest.mark.parametrize("mutate, key, allowed", [
    (lambda p: p["experiments"]["mt10_mtsac"].update(method="sacx"),
     "experiments.mt10_mtsac.method", "allowed: mtsac"),
    (lambda p: p["experiments"]["mt10_mtsac"].update(benchmark="mt11"),
     "experiments.mt10_mtsac.benchmark", "mt10, mt50"),
    (lambda p: p["experiments"]["mt10_mtsac"].update(hidden_dim=0),
     "experiments.mt10_mtsac.hidden_dim", ">= 1"),
    (lambda p: p["sac"].update(batch_size=-5), "sac.batch_size", ">= 1"),
    (lambda p: p["train"].update(stepz=3), "train.stepz", "allowed: steps"),
    (lambda p: p.update(bogus=1), "bogus", "allowed:"),
    (lambda p: p["env"].update(goals="random"), "env.goals", "fixed, resample"),
    (lambda p: p["env"].update(normalize_reward="yes"), "env.normalize_reward", "true or false"),
    (lambda p: p["runs"].update(plain=["nope"]), "runs.plain", "allowed: mt10_mtsac"),
])
def test_bad_params_name_key_and_allowed(raw_params, mutate, key, allowed):
    bad = copy.deepcopy(raw_params)
    mutate(bad)
    with pytest.raises(ConfigError) as err:
        parse_params(bad)
    msg = str(err.value)
    assert msg.startswith(key), msg
    assert allowed in msg
    assert "\n" not in msg


def test_stage_script_fails_with_one_line_and_writes_nothing(raw_params, tmp_path):
    bad = copy.deepcopy(raw_params)
    bad["experiments"]["mt10_mtsac"]["method"] = "unknown_method"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(bad))
    out = tmp_path / "runs"
    proc = subprocess.run([sys.executable, str(ROOT / "pipeline" / "train.py"), "--exp",
                           "mt10_mtsac", "--seed", "1", "--params", str(params), "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert lines == ["error: experiments.mt10_mtsac.method: unknown value 'unknown_method'; "
                     "allowed: " + ", ".join(METHODS)]
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [params]


def _rejection(raw_params, mutate) -> str:
    """The ConfigError message for ``raw_params`` changed by ``mutate`` (a copy)."""
    bad = copy.deepcopy(raw_params)
    mutate(bad)
    with pytest.raises(ConfigError) as err:
        parse_params(bad)
    return str(err.value)


@pytest.mark.parametrize("mutate, key", [
    (lambda p: p.update(long_seeds=[99]), "long_seeds: must be a subset of seeds"),
    (lambda p: p["train"].update(long_steps=10), "train.long_steps: must be >= train.steps"),
    (lambda p: p["train"].update(eval_every=7), "train.steps: must be a multiple"),
    (lambda p: p["tables"]["mt10_1m"].update(rows=["mt10_care_ptsl_sum"]),
     "tables.mt10_1m.rows: 'mt10_care_ptsl_sum' must set long: true"),
    (lambda p: p["tables"]["mt10_200k"].update(rows=["mt10_mtsac", "mt50_care"]),
     "tables.mt10_200k.rows: all rows must share one benchmark"),
    (lambda p: p["tables"]["mt10_200k"].update(at="mid"), "tables.mt10_200k.at: unknown value"),
    (lambda p: p.update(budget="huge"), "budget: unknown budget 'huge'; allowed: small, paper"),
    (lambda p: p["budgets"]["paper"].update({"train.stepz": 5}),
     "budgets.paper: budgets.paper.train.stepz: no such key"),
    (lambda p: p["budgets"]["paper"].update({"long_seeds": [11]}),
     "budgets.paper: long_seeds: must be a subset of seeds"),
    (lambda p: p["runs"].update(plain=p["runs"]["plain"] + ["mt10_sac_ptsl"]),
     "runs.plain: experiment 'mt10_sac_ptsl' belongs in runs.ptsl"),
])
def test_grid_and_budget_errors(raw_params, mutate, key):
    message = _rejection(raw_params, mutate)
    assert message.startswith(key), message


def test_long_seeds_train_to_long_steps_and_tables_resolve(raw_params):
    params = parse_params(raw_params)
    assert run_config(params, "mt10_mtsac", params.long_seeds[0]).train.steps == params.train.long_steps
    assert run_config(params, "mt10_care_ptsl_sum", 1).train.steps == params.train.steps
    assert run_config(params, "mt10_care_ptsl", 1).experiment.pal_dim == params.pal_dim
    assert run_config(params, "mt50_care_ptsl", 1).experiment.pal_dim == 32  # its own
    paper = parse_params({**raw_params, **{"seeds": list(range(1, 11)), "long_seeds": [1, 2, 3, 4]}})
    assert run_config(paper, "mt10_mtsac", 5).train.steps == paper.train.steps
    t = paper.tables["mt10_1m"]
    assert paper.table_step(t) == paper.train.long_steps and paper.table_seeds(t) == (1, 2, 3, 4)


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p.update(pal_dim=1000), "pal_dim: must be <= 321, the hidden_dim of experiment "
                                       "mt10_care_ptsl_project which reads it; got 1000"),
    (lambda p: p["experiments"]["mt50_care_ptsl"].update(pal_dim=300),
     "experiments.mt50_care_ptsl.pal_dim: must be <= hidden_dim (274), got 300"),
    (lambda p: p["runs"].update(plain=p["runs"]["plain"] + ["mt10_mtsac"]),
     "runs.plain: 'mt10_mtsac' is listed twice; each experiment once"),
    (lambda p: p["runs"].update(plain=[], ptsl=[]), "runs: nothing to train"),
    (lambda p: p["tables"]["mt10_200k"].update(rows=["mt10_mtsac", "mt10_mtsac"]),
     "tables.mt10_200k.rows: 'mt10_mtsac' is listed twice"),
    (lambda p: p["sac"].update(log_std_min=3.0), "sac.log_std_min: must be < sac.log_std_max (2)"),
    (lambda p: p["experiments"].update({"mt10.x": p["experiments"]["mt10_mtsac"]}),
     "experiments: experiment name 'mt10.x' is not allowed; allowed: letters, digits, _ and -"),
    (lambda p: p["tables"].update({"a b": p["tables"]["mt10_200k"]}),
     "tables: table name 'a b' is not allowed"),
    (lambda p: p.update(seeds=[1, 2**40], long_seeds=[1]), "seeds: must be <= 2147483647"),
    (lambda p: p["budgets"]["paper"].update({"pal_dim": 500}),
     "budgets.paper: pal_dim: must be <= 321"),
])
def test_sizes_names_and_lists_a_demanding_user_expects(raw_params, mutate, message):
    got = _rejection(raw_params, mutate)
    assert got.startswith(message), got
    assert "\n" not in got


def test_yaml_errors_are_one_line_with_the_place(tmp_path):
    from ptsl.ops.params import load_params

    text = (ROOT / "params.yaml").read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("seeds: [1]", "seeds: [1", 1))
    with pytest.raises(ConfigError) as err:
        load_params(broken)
    assert str(err.value).startswith(f"{broken}: not valid YAML (line ")
    assert "\n" not in str(err.value)
    twice = tmp_path / "twice.yaml"
    twice.write_text(text.replace("seeds: [1]", "seeds: [1]\nseeds: [2]", 1))
    with pytest.raises(ConfigError, match=r"twice.yaml: not valid YAML \(line \d+, column 1: "
                                          r"duplicate key 'seeds'\)"):
        load_params(twice)


def test_only_ptsl_rows_without_their_own_pal_dim_read_the_top_level_one(raw_params):
    """What decides a row's DVC group (train vs train_ptsl), so `dvc exp run -S pal_dim=32`
    re-runs the PTSL rows alone; tests/e2e/test_ablation_e2e.py runs one row of each kind."""
    for name, m in METHODS.items():
        base = {"benchmark": "mt10", "method": name, "hidden_dim": 32, "num_layers": 2}
        assert ExperimentConfig(**base).reads_pal_dim == m.ptsl, name
        if m.ptsl:
            assert not ExperimentConfig(**base, pal_dim=8).reads_pal_dim
    params = parse_params(raw_params)
    assert {stage_group(params, e) for e in params.experiments} == {False, True}
    assert stage_group(params, "mt10_care_ptsl") and not stage_group(params, "mt50_care_ptsl")
    assert not stage_group(params, "mt10_softmod")


def test_the_api_groups_a_row_as_the_params_file_does():
    """make_config writes its one row into runs.ptsl or runs.plain by the rule the parser checks
    (written once, ptsl.core.config.reads_top_pal_dim): a PTSL row without its own pal_dim reads
    the top-level one (the params file's 50), one with its own keeps it, other methods read none;
    an unknown method is refused as a method, not as a misplaced row."""
    assert make_config("care_ptsl", hidden_dim=64).experiment.pal_dim == 50
    assert make_config("sac_ptsl", hidden_dim=64, pal_dim=8).experiment.pal_dim == 8
    assert make_config("mtsac", hidden_dim=64).experiment.pal_dim is None
    assert not reads_top_pal_dim("nope", None)
    with pytest.raises(ConfigError, match=r"^method: unknown value 'nope'"):
        make_config("nope")


def test_the_pal_dim_bound_is_one_check_with_two_messages():
    """The rank bound of an experiment's own pal_dim and of the top-level one that rows read is
    the same check; its line names the experiment that reads the top-level value."""
    check_pal_dim(64, 64)
    with pytest.raises(ConfigError, match=r"^pal_dim: must be <= hidden_dim \(64\), got 65$"):
        check_pal_dim(65, 64)
    with pytest.raises(ConfigError, match=r"^pal_dim: must be <= 64, the hidden_dim of experiment "
                                          r"row which reads it; got 65$"):
        check_pal_dim(65, 64, "row")
    rows = [ExperimentConfig(benchmark="mt10", method="care_ptsl", hidden_dim=h, name=f"r{h}")
            for h in (128, 64)] + [ExperimentConfig(benchmark="mt10", method="care_ptsl",
                                                    hidden_dim=16, pal_dim=8, name="own")]
    check_top_pal_dim(64, rows)  # "own" keeps its own 8: its width of 16 does not bound it
    with pytest.raises(ConfigError, match="experiment r64 which reads it; got 65"):
        check_top_pal_dim(65, rows)


def test_an_inactive_protocol_is_not_held_to_the_budgets_step_counts(raw_params):
    """60 steps evaluated every 20 is valid under the reference protocol, although Meta-World+'s
    preset evaluates every second interval; switching to it refuses them in one line."""
    from ptsl.ops.params import apply_preset

    raw = copy.deepcopy(raw_params)
    raw["train"].update(steps=60, long_steps=60, eval_every=20, checkpoint_every=20)
    assert parse_params(raw).train.steps == 60
    switched = apply_preset(raw, raw["protocols"]["metaworld-plus"], "protocols.metaworld-plus")
    with pytest.raises(ConfigError, match=r"^train\.steps: must be a multiple of train\.eval_every "
                                          r"x train\.eval_stride \(40\)"):
        parse_params(switched)


def test_the_observation_option_leaves_every_default_config_as_it_was(raw_params):
    """A run that does not set ``env.observation`` saves (model.pt) and keys (resume checkpoints)
    the same config dict as before the option existed; a run that sets it names it."""
    params = parse_params(raw_params)
    cfg = run_config(params, params.runs.plain[0], params.seeds[0])
    assert "observation" not in cfg.to_dict()["env"]
    v1 = cfg.model_copy(update={"env": cfg.env.model_copy(update={"observation": "v1"})})
    assert v1.to_dict()["env"]["observation"] == "v1"
    assert v1.key() != cfg.key()
    from ptsl.core.config import RunConfig

    assert RunConfig.from_dict(v1.to_dict()) == v1 and RunConfig.from_dict(cfg.to_dict()) == cfg
    bad = copy.deepcopy(raw_params)
    bad["env"]["observation"] = "v2"
    with pytest.raises(ConfigError, match=r"^env\.observation: unknown value 'v2'; allowed: "
                                          r"full, v1$"):
        parse_params(bad)
