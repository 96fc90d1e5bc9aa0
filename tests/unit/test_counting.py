"""Parameter counting by PTSL's rule (reference 5.6): every MT10 count of the reference table
at the reference's 12-dim observation, and the hidden-size solver."""

from __future__ import annotations


import pytest

from ptsl.core.config import ExperimentConfig
from ptsl.tools.counting import REFERENCE_SETTINGS, count_parameters, solve_hidden_dim

# Reference 5.6, MT10, obs_dim 12, action_dim 4: the ground truth the architectures must reproduce.
EXPECTED = {
    "MT-SAC": 1_641_222,
    "CARE": 1_871_534,
    "CARE+PTSL shared none/sum": 1_871_532,
    "CARE+PTSL linear residual": 1_871_547,
    "CARE+PTSL project residual": 1_871_467,
    "CARE+PTSL none at H=321 (README)": 1_833_967,
    "CARE+PTSL 2 layers, shared": 1_556_454,
    "CARE+PTSL 2 layers, independent": 1_756_454,
    "MT-SAC+PTSL": 1_869_833,
}



def _exp(**fields) -> ExperimentConfig:
    return ExperimentConfig(benchmark="mt10", **fields)


@pytest.mark.parametrize("label,fields", REFERENCE_SETTINGS, ids=[s[0] for s in REFERENCE_SETTINGS])
def test_reference_mt10_counts(label, fields):
    count = count_parameters(_exp(**fields), obs_dim=12, action_dim=4, num_tasks=10)
    assert count == EXPECTED[label]


def test_sum_residual_adds_no_parameters():
    base = dict(method="care_ptsl", hidden_dim=326, num_layers=3, pal_dim=50)
    assert count_parameters(_exp(**base, residual_mode="sum"), 12, 4, 10) == 1_871_532


def test_task_encoder_and_soft_modularization_counts_follow_the_rule():
    # Soft Modularization: the learned task encoder (embedding + MLP) is excluded, the tied
    # encoder is counted in actor, critic and critic target.
    exp = _exp(method="softmod", hidden_dim=400, num_layers=3, num_experts=4)
    enc = 12 * 50 + 50 + 2 * (50 * 50 + 50)
    routing = (50 * 400 + 400) + (400 * 16 + 16)
    actor = enc + 4 * (50 * 400 + 400) + 4 * (400 * 8 + 8) + routing
    q = (54 * 50 + 50) + 4 * (50 * 400 + 400) + 4 * (400 * 1 + 1) + routing
    assert count_parameters(exp, 12, 4, 10) == actor + 2 * (enc + 2 * q) + 10


def test_solver_recovers_the_reference_hidden_sizes():
    care = count_parameters(_exp(method="care", hidden_dim=400, num_layers=3), 12, 4, 10)
    ptsl = _exp(method="care_ptsl", hidden_dim=400, num_layers=3, pal_dim=50)  # any start
    assert solve_hidden_dim(ptsl, care, 12, 4, 10) == 326
    project = ptsl.model_copy(update={"residual_mode": "project"})
    assert solve_hidden_dim(project, care, 12, 4, 10) == 321
    sac_ptsl = _exp(method="sac_ptsl", hidden_dim=400, num_layers=3, pal_dim=50)
    assert solve_hidden_dim(sac_ptsl, care, 12, 4, 10) == 367
    # Closest, not just first above: a target one above an exact count returns that H.
    exact = count_parameters(ptsl.model_copy(update={"hidden_dim": 100}), 12, 4, 10)
    assert solve_hidden_dim(ptsl, exact + 1, 12, 4, 10) == 100


def test_params_yaml_hidden_sizes_are_the_solved_ones(raw_params):
    """Experiments declared to match another's parameter count use the solver's hidden size at
    the observation size actually used (39), so params.yaml cannot drift from the solver."""
    from ptsl.ops.params import parse_params, run_config
    from ptsl.tools.counting import count_parameters, solve_hidden_dim
    from ptsl.core.benchmarks import ACTION_DIM, OBS_DIM, num_tasks

    params = parse_params(raw_params)
    checked = 0
    for name, exp in params.experiments.items():
        if exp.matches is None:
            continue
        exp = run_config(params, name, 1).experiment
        target_exp = run_config(params, exp.matches, 1).experiment
        n = num_tasks(exp.benchmark)
        target = count_parameters(target_exp, OBS_DIM, ACTION_DIM, n)
        assert solve_hidden_dim(exp, target, OBS_DIM, ACTION_DIM, n) == exp.hidden_dim, name
        checked += 1
    assert checked >= 4


@pytest.fixture(scope="module")
def solved_at_39() -> list:
    """The counting tool's table at Meta-World v3's 39-dim observation (seconds of solving),
    computed once for the tests that read it."""
    from ptsl.tools.counting import solved_table

    return solved_table(39)


def test_the_reference_mt50_sizes_match_care_at_its_observation_and_are_solved_again(
        solved_at_39):
    """The reference's MT50 sizes (CARE+PTSL 274x3 P32 and 331x2 P42, MT-SAC+PTSL 325x3 P32)
    are the solver's answers for CARE's MT50 count at 12 dims; at 39 dims the matched rows of
    params.yaml take the solver's answers there (300 for MT-SAC+PTSL)."""
    from ptsl.tools.counting import REFERENCE_MT50_SETTINGS, care_count

    target = care_count("mt50", 12)
    for label, fields in REFERENCE_MT50_SETTINGS[1:]:
        exp = ExperimentConfig(benchmark="mt50", **fields)
        assert solve_hidden_dim(exp, target, 12, 4, 50) == fields["hidden_dim"], label
    mt50 = {label: h for label, bench, h, _, _ in solved_at_39 if bench == "mt50"}
    assert mt50 == {"CARE+PTSL, L=3, P=32": 274, "CARE+PTSL 2 layers, P=42": 331,
                    "MT-SAC+PTSL, L=3, P=32": 300, "MT-MH-SAC, L=3": 82,
                    "MOORE, 6 experts, L=3": 162, "PaCo, K=20, L=3": 86}


def test_the_baselines_at_their_references_sizes_and_at_cares(solved_at_39):
    """Multi-head SAC (mtrl's 400x3 body, 2-layer heads), MOORE (the authors' 400x3, 4
    experts) and PaCo (Meta-World+'s 400x3, 5 parameter sets) by the formula of their networks
    at the 12-dim observation, and the solver's CARE-matched sizes at 39 dims; the solver starts
    from the experiment's own size, so MOORE is never built narrower than its expert count."""
    from ptsl.tools.counting import BASELINE_SETTINGS

    h, d, t, a = 400, 12, 10, 4

    def mh(i, o):  # body build_mlp(i, H, H, 3), heads H->H->o per task
        return i * h + h + 3 * (h * h + h) + t * (h * h + h + h * o + o)

    def moore(i, o, k=4):  # k experts of 3 layers, a (T, k) table, a head per task
        return t * k + k * (i * h + h + 2 * (h * h + h)) + t * (h * o + o)

    def paco(i, o, k=5):  # a Dense(k) on the one-hot, k sets of every layer, the head's too
        return t * k + k + k * (i * h + h + 2 * (h * h + h) + h * o + o)

    want = {"MT-MH-SAC (mtrl)": mh(d, 2 * a) + 4 * mh(d + a, 1) + t,
            "MOORE, 4 experts": moore(d, 2 * a) + 4 * moore(d + a, 1) + t,
            "PaCo, 5 parameter sets": paco(d, 2 * a) + 4 * paco(d + a, 1) + t}
    for label, fields in BASELINE_SETTINGS:
        assert count_parameters(_exp(**fields), d, 4, 10) == want[label], label
    assert want == {"MT-MH-SAC (mtrl)": 10_506_530, "MOORE, 4 experts": 6_593_930,
                    "PaCo, 5 parameter sets": 8_206_345}
    mt10 = {label: h for label, bench, h, _, _ in solved_at_39 if bench == "mt10"}
    assert mt10["MT-MH-SAC, L=3"] == 167 and mt10["MOORE, 4 experts, L=3"] == 205
    assert mt10["PaCo, K=5, L=3"] == 183
