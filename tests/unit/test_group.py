"""A seed group's update gives every seed the bits of its own update (ptsl.core.agent.group):
every parameter, optimiser moment, temperature, generator state and loss of each seed, compared
with the same seed's agent updated alone on the same batches."""

from __future__ import annotations

import pytest
import torch

from ptsl.core.agent.buffer import Batch
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.agent.group import SeedGroup, groupable
from ptsl.core.agent.nets.mlp import Linear, batched_keeps_bits
from ptsl.core.benchmarks import benchmark_tasks
from ptsl.ops.params import load_params, run_config

from ..conftest import ROOT
from ..helpers import assert_same_training_state

TASKS = benchmark_tasks("mt10")


def _agents(experiment: str, seeds: list[int], params_file: str, batch: int, **changes):
    params = load_params(ROOT / params_file)
    out = []
    for seed in seeds:
        cfg = run_config(params, experiment, seed)
        cfg = cfg.model_copy(update={"sac": cfg.sac.model_copy(update={"batch_size": batch}),
                                     "experiment": cfg.experiment.model_copy(update=changes)})
        out.append(build_agent(cfg, Shapes(39, 4, len(TASKS)), TASKS))
    return out


def _batches(seeds: int, rows: int, updates: int) -> list[list[Batch]]:
    g = torch.Generator().manual_seed(11)

    def one() -> Batch:
        return Batch(obs=torch.randn(rows, 39, generator=g),
                     action=torch.rand(rows, 4, generator=g) * 2 - 1,
                     reward=torch.randn(rows, 1, generator=g),
                     next_obs=torch.randn(rows, 39, generator=g),
                     not_done=(torch.rand(rows, 1, generator=g) > 0.1).float(),
                     task=torch.randint(0, len(TASKS), (rows,), generator=g))

    return [[one() for _ in range(seeds)] for _ in range(updates)]


@pytest.mark.parametrize("experiment, seeds, batch, threads, updates, changes", [
    ("mt10_mtsac", [1], 128, 1, 4, {}),
    ("mt10_mtsac", [1, 2, 3], 128, 2, 6, {}),
    ("mt10_mtsac", [3, 1, 4, 2, 5], 128, 1, 6, {}),
    ("mt10_mtsac", [2, 7], 1280, 2, 3, {}),
    ("mt10_mtsac", [1, 2], 128, 2, 4, {"task_onehot": True}),
    # not batched (each seed updates alone in turn): the same bits by construction, checked
    ("mt10_care_ptsl", [1, 2], 128, 1, 2, {}),
])
def test_a_group_gives_every_seed_its_own_bits(experiment, seeds, batch, threads, updates,
                                               changes):
    torch.set_num_threads(threads)
    try:
        alone = _agents(experiment, seeds, "studies/mt10-cpu/params.yaml", batch, **changes)
        group = SeedGroup(_agents(experiment, seeds, "studies/mt10-cpu/params.yaml", batch,
                                  **changes))
        assert group.batched == groupable(alone[0].meta["config"]["experiment"]["method"])
        for step in _batches(len(seeds), batch, updates):
            own = [a.update(b) for a, b in zip(alone, step)]
            shared = group.update(step)
            for mine, theirs in zip(own, shared):
                assert {k: v.item() for k, v in mine.items()} == \
                    {k: v.item() for k, v in theirs.items()}
        for a, b in zip(alone, group.agents):
            assert_same_training_state(a.training_state(), b.training_state())
            assert torch.equal(a.generator.get_state(), b.generator.get_state())
    finally:
        torch.set_num_threads(1)


def test_a_group_batches_on_a_cpu_only_where_this_host_keeps_the_bits():
    """On a CPU, an MT-SAC group goes through its networks as one exactly where this host's
    batched product keeps each seed's bits at every Linear's shape (true on the AVX-512 Xeons,
    false on an AVX2-only AMD EPYC); a method that does not batch on the host path never does."""
    agents = _agents("mt10_mtsac", [1, 2], "studies/mt10-cpu/params.yaml", 128)
    group = SeedGroup(agents)
    shapes = [tuple(m.weight.shape) for net in (agents[0].actor, agents[0].critic)
              for m in net.modules() if isinstance(m, Linear)]
    assert len(shapes) >= 8  # the actor's and both critics' layers
    for rows in (128, 10):
        assert group.as_one(rows) == batched_keeps_bits(shapes, 2, rows)
    assert not SeedGroup(_agents("mt10_care", [1, 2], "studies/mt10-cpu/params.yaml",
                                 128)).as_one(128)


def test_a_group_needs_matching_agents():
    a = _agents("mt10_mtsac", [1], "studies/mt10-cpu/params.yaml", 128)
    b = _agents("mt10_care", [1], "studies/mt10-cpu/params.yaml", 128)
    with pytest.raises(ValueError, match="share their experiment"):
        SeedGroup(a + b)
    with pytest.raises(ValueError, match="2 batches"):
        SeedGroup(a).update(_batches(2, 8, 1)[0])
    assert groupable("mtsac") and not groupable("care_ptsl")


def _tiny(seed: int, method: str = "mtsac", steps: int = 80):
    from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig

    return RunConfig(name="tiny", seed=seed,
                     experiment=ExperimentConfig(benchmark="mt10", method=method, hidden_dim=32,
                                                 num_layers=2),
                     env=EnvConfig(episode_length=20), sac=SACConfig(batch_size=64, init_steps=20),
                     train=TrainConfig(steps=steps, eval_every=40, checkpoint_every=40))


def _written(cfg, result, folder):
    from ptsl.core.loop import write_outputs

    write_outputs(cfg, result, folder)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("method, seeds, batched", [("mtsac", [1, 3], True),
                                                     ("care", [2, 1], True)])
def test_seeds_trained_side_by_side_write_what_each_writes_alone(method, seeds, batched,
                                                                 task_cache, tmp_path):
    """train_group: every seed's model.pt, curve.csv and summary.json byte for byte as its own
    train() writes them (MT-SAC's updates batched; CARE's seeds update in turn, as every seed
    does by default)."""
    from ptsl.core.loop import train, train_group
    from ptsl.core.runtime import Runtime

    runtime = Runtime(device="cpu", vector="sync")
    cfgs = [_tiny(s, method) for s in seeds]
    together = train_group(cfgs, task_cache=task_cache, progress=False, runtime=runtime,
                           batch_updates=batched)
    for cfg, result in zip(cfgs, together):
        alone = train(cfg, task_cache=task_cache, progress=False, runtime=runtime)
        assert _written(cfg, result, tmp_path / f"g{cfg.seed}") == \
            _written(cfg, alone, tmp_path / f"a{cfg.seed}")


def test_a_group_resumes_seeds_from_checkpoints_of_different_steps(task_cache, tmp_path):
    """Seed 1 stopped after its step-40 checkpoint, seed 2 never started: the group resumes
    seed 1, runs seed 2 alone up to step 40, then both side by side; each ends as it would
    uninterrupted."""
    from ptsl.core.loop import train, train_group
    from ptsl.core.runtime import Runtime

    runtime = Runtime(device="cpu", vector="sync")
    cfgs = [_tiny(1), _tiny(2)]
    scratch = tmp_path / "resume"

    class Stop(Exception):
        pass

    def stop_at_50(done: int) -> None:
        if done == 50:
            raise Stop

    with pytest.raises(Stop):
        train(cfgs[0], scratch_dir=scratch, task_cache=task_cache, progress=False,
              runtime=runtime, on_step=stop_at_50)
    together = train_group(cfgs, scratch_dir=scratch, task_cache=task_cache, progress=False,
                           runtime=runtime, batch_updates=True)
    assert [r.resumed_from for r in together] == [40, 0]
    for cfg, result in zip(cfgs, together):
        alone = train(cfg, task_cache=task_cache, progress=False, runtime=runtime)
        assert _written(cfg, result, tmp_path / f"g{cfg.seed}") == \
            _written(cfg, alone, tmp_path / f"a{cfg.seed}")
    assert not list(scratch.glob("*.pt"))


def test_a_group_refuses_runs_that_differ_in_more_than_their_seed(task_cache):
    from ptsl.core.loop import train_group

    with pytest.raises(ValueError, match="seeds 1 and 2 of tiny differ in more than their seed"):
        train_group([_tiny(1), _tiny(2, steps=120)], task_cache=task_cache, progress=False)
    with pytest.raises(ValueError, match="seed 1 of tiny given twice"):
        train_group([_tiny(1), _tiny(1)], task_cache=task_cache, progress=False)
