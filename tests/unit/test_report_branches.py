"""The task branches in the reports (ptsl.report.branches): the zeroing table pairs each seed's
intact and zeroed success and gives the t interval of their differences; the aggregate reads
every PTSL run's records and reports them only where the params ask, refuses a missing one in
one line, and loads no agent, network or environment to do it."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from ptsl.core.branch_records import MEAN_TASK, ZEROED_COLUMNS, write_branch_records
from ptsl.ops.params import parse_params
from ptsl.report.branches import (ZEROED_TABLE_COLUMNS, collect_branches, zeroing_markdown,
                                  zeroing_table)
from ptsl.report.contrasts import t_interval

from ..conftest import ROOT

TASKS = ("a-v3", "b-v3")


def _zeroed(experiment: str, seed: int, intact: tuple, zeroed: tuple) -> pd.DataFrame:
    return pd.DataFrame([{"run": f"{experiment}-{seed}", "experiment": experiment, "seed": seed,
                          "method": "care_ptsl", "task": task, "episodes": 1,
                          "intact_success": i, "zeroed_success": z, "intact_return": 1.0,
                          "zeroed_return": 0.5}
                         for task, i, z in zip(TASKS, intact, zeroed)],
                        columns=list(ZEROED_COLUMNS))


def test_the_zeroing_table_pairs_by_seed():
    # seed 3 listed first: pairing follows the seed, not the order of the rows
    frame = pd.concat([_zeroed("x", 3, (1.0, 0.0), (0.0, 0.0)),
                       _zeroed("x", 1, (1.0, 1.0), (1.0, 0.0)),
                       _zeroed("x", 2, (0.0, 1.0), (0.0, 1.0)),
                       _zeroed("y", 1, (1.0, 0.0), (1.0, 1.0))], ignore_index=True)
    table = zeroing_table(frame, {"x": "Row X"})
    assert list(table.columns) == list(ZEROED_TABLE_COLUMNS)
    assert table[["experiment", "task"]].values.tolist() == [
        ["x", MEAN_TASK], ["x", "a-v3"], ["x", "b-v3"], ["y", MEAN_TASK], ["y", "a-v3"],
        ["y", "b-v3"]]
    mean = table.iloc[0]
    # per seed (1, 2, 3), mean over tasks: intact 1.0, 0.5, 0.5; zeroed 0.5, 0.5, 0.0
    diffs = [0.5, 0.0, 0.5]
    assert (mean["label"], mean["seeds"]) == ("Row X", 3)
    assert mean["intact"] == pytest.approx(2 / 3) and mean["zeroed"] == pytest.approx(1 / 3)
    assert mean["difference"] == pytest.approx(np.mean(diffs))
    assert (mean["difference_low"], mean["difference_high"]) == pytest.approx(t_interval(diffs))
    a = table.iloc[1]  # a-v3 per seed: intact 1, 0, 1; zeroed 1, 0, 0
    assert (a["intact"], a["zeroed"], a["difference"]) == pytest.approx((2 / 3, 1 / 3, 1 / 3))
    one = table.iloc[3]  # a single seed: no interval
    assert one["difference"] == -0.5 and np.isnan(one["difference_low"])
    text = zeroing_markdown(table, episodes=1)
    assert "**Row X** (3 seed(s)): success 0.667 intact, 0.333 with the task branches" in text
    assert "| **mean over tasks** | 0.667 | 0.333 | +0.333 [" in text
    assert "(one seed: no interval)" in text


def _params(branches: bool):
    from ptsl.ops.params import read_yaml

    raw = copy.deepcopy(read_yaml(ROOT / "params.yaml"))
    raw["experiments"] = {
        "tiny_ptsl": {"benchmark": "reach-v3", "method": "sac_ptsl", "hidden_dim": 16,
                      "num_layers": 2, "label": "Tiny PTSL"},
        "tiny_plain": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 16,
                       "num_layers": 2}}
    raw["runs"] = {"plain": ["tiny_plain"], "ptsl": ["tiny_ptsl"]}
    raw["tables"] = {"t": {"title": "tiny", "rows": ["tiny_plain", "tiny_ptsl"]}}
    raw["pal_dim"], raw["seeds"], raw["long_seeds"] = 4, [1, 2], [1]
    raw["env"]["episode_length"], raw["protocol"] = 10, "custom"
    raw["train"].update(steps=raw["train"]["eval_every"], long_steps=raw["train"]["eval_every"])
    raw["report"]["branches"] = branches
    return parse_params(raw, check_presets=False)


def _records(params, folder):
    """Each PTSL run's records as its stage writes them: the norms measured on a built agent,
    a zeroing result by hand."""
    from ptsl.core.agent.builders import Shapes, build_agent
    from ptsl.core.branches import Observations, measure_observations
    from ptsl.ops.params import run_config

    rng = np.random.default_rng(0)
    for seed in params.seeds:
        cfg = run_config(params, "tiny_ptsl", seed)
        agent = build_agent(cfg, Shapes(39, 4, 1), ("reach-v3",))
        obs = Observations(rng.normal(size=(10, 39)).astype(np.float32), np.zeros(10, int),
                           rng.uniform(-1, 1, size=(10, 4)).astype(np.float32))
        zeroed = pd.DataFrame([{"run": f"tiny_ptsl-{seed}", "experiment": "tiny_ptsl",
                                "seed": seed, "method": "sac_ptsl", "task": "reach-v3",
                                "episodes": 1, "intact_success": 1.0, "zeroed_success": 0.0,
                                "intact_return": 2.0, "zeroed_return": 1.0}])
        write_branch_records(folder / f"tiny_ptsl-{seed}", measure_observations(agent, obs, cfg),
                             zeroed)


def _run_records(params):
    from ptsl.report.inputs import RunRecords

    from .report_data import curve

    frames = []
    for exp in ("tiny_plain", "tiny_ptsl"):
        for seed in params.seeds:
            frame = curve([0, params.train.eval_every], lambda s: 1,
                          np.random.default_rng(seed), ["reach-v3"])
            frame.insert(0, "seed", seed)
            frame.insert(0, "experiment", exp)
            frames.append(frame)
    return RunRecords(evals=pd.DataFrame([{"experiment": "tiny_plain", "parameter_count": 1},
                                          {"experiment": "tiny_ptsl", "parameter_count": 2}]),
                      curves=pd.concat(frames, ignore_index=True))


def test_the_aggregate_reports_the_recorded_branches_only_where_the_params_ask(tmp_path):
    """``report.branches: true``: the reports carry the runs' norms (byte for byte the stage's
    rows), the zeroing table, the figure and a section of results.md linking them; false (the
    default): none of them."""
    from ptsl.ops.paths import PUBLISHED
    from ptsl.report.published import Published
    from ptsl.report.tables import write_reports

    on, off = _params(True), _params(False)
    folder = tmp_path / "data" / "branches"
    _records(on, folder)
    records, pub = _run_records(on), Published.load(ROOT / PUBLISHED)
    write_reports(off, records, pub, tmp_path / "off")
    assert not (tmp_path / "off" / "data" / "branches.csv").exists()
    assert "task branches" not in (tmp_path / "off" / "results.md").read_text()
    write_reports(on, records, pub, tmp_path / "on", branches=collect_branches(on, folder))
    data = tmp_path / "on" / "data"
    rows = [(folder / f"tiny_ptsl-{s}" / "branches.csv").read_text().splitlines() for s in (1, 2)]
    assert (data / "branches.csv").read_text().splitlines() == rows[0] + rows[1][1:]
    table = pd.read_csv(data / "branches_zeroed.csv")
    assert table[["task", "seeds", "intact", "zeroed", "difference"]].values.tolist() == [
        [MEAN_TASK, 2, 1.0, 0.0, 1.0], ["reach-v3", 2, 1.0, 0.0, 1.0]]
    assert (tmp_path / "on" / "figures" / "branches.png").read_bytes()[:4] == b"\x89PNG"
    results = (tmp_path / "on" / "results.md").read_text()
    assert "](figures/branches.png)" in results and "(data/branches_zeroed.csv)" in results
    assert "**Tiny PTSL** (2 seed(s)): success 1.000 intact, 0.000 with the task" in results


def test_a_missing_record_is_one_line_naming_it(tmp_path):
    params = _params(True)
    folder = tmp_path / "branches"
    _records(params, folder)
    (folder / "tiny_ptsl-2" / "zeroed.csv").unlink()
    with pytest.raises(FileNotFoundError) as err:
        collect_branches(params, folder)
    assert str(err.value) == (f"{folder / 'tiny_ptsl-2' / 'zeroed.csv'} is missing; run `dvc "
                              "repro` to produce it (the branches_ptsl stage of tiny_ptsl-2)")


def test_the_reports_load_no_agent_network_or_environment():
    """The aggregate's report code reaches none of the core's agent, networks, environments or
    evaluation, lazy imports included: it reads files."""
    from .test_import_layers import source_closure

    closure = {str(p.relative_to(ROOT / "src" / "ptsl"))
               for p in source_closure(ROOT / "pipeline" / "aggregate.py")}
    assert "report/tables.py" in closure and "report/branches.py" in closure
    assert not [p for p in closure if p.startswith("core/agent/")
                or p in ("core/envs.py", "core/evaluation.py", "core/branches.py")]
