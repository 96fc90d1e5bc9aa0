"""Bad input: one clear line naming the key or file and what is allowed, a non-zero exit, and no
file of the project changed.

A tiny pipeline runs once (real DVC, real Meta-World, real MLflow store); each case then breaks
one input in a copy of it and runs the real stage script (``python pipeline/<stage>.py``) or
real DVC (``dvc repro``, ``dvc repro <stage>``, ``dvc exp run -S``) there, and compares a hash
of every file before and after. The stage-script cases all run in one Python process, each as its
own process would run it (tests/commands.py; a process each spent some 80 s of a core importing
torch, DVC and MLflow again), and two of them also in a process of their own, which must answer
the same.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest
import yaml

from ..commands import Answer, Job, run_alone, run_in_one_process
from ..pipeline_project import env_for, make_project

EXPERIMENTS = {
    "tiny_mtsac": {"benchmark": "reach-v3", "method": "mtsac", "hidden_dim": 16,
                   "num_layers": 2, "long": True, "label": "Tiny MT-SAC"},
    # CARE+PTSL reads the task embeddings and the top-level pal_dim.
    "tiny_ptsl": {"benchmark": "reach-v3", "method": "care_ptsl", "hidden_dim": 16,
                  "num_layers": 2, "label": "Tiny CARE+PTSL"},
}
# Half the usual tiny budget: what matters here is that every output exists, not what it holds.
EXTRA = {"pal_dim": 4, "train": {"steps": 20, "long_steps": 20, "eval_every": 10,
                                 "checkpoint_every": 20, "eval_episodes": 1, "eval_stride": 1}}
EMBEDDINGS = "data/task_embeddings/metaworld-mt50.json"
MODEL = "data/runs/tiny_mtsac-1/model.pt"

# Left out of the comparison, each because it changes legitimately while nothing is wrong:
SKIP_DIRS = {
    ".git",          # git's own store: `dvc exp run` records its run state and refreshes the index
    "tmp",           # .dvc/tmp: DVC's locks, hash cache and experiment workspace, every command
    "__pycache__",   # bytecode Python caches when it imports a module
    ".scratch",      # the Meta-World task cache (goal lists), filled on first use by any stage
    "mlartifacts",   # the MLflow artifact store (run records, not pipeline outputs)
}
SKIP_FILES = {"mlflow.db"}  # the MLflow run store, likewise


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    """A tiny git project whose whole pipeline has run once."""
    root = make_project(tmp_path_factory.mktemp("ran"), EXPERIMENTS, seeds=[1], extra=EXTRA,
                        git=True)
    # MLflow off for this first run only (its store is not what these tests look at, and its
    # first start costs seconds); the cases run with it on, as a user does.
    proc = subprocess.run([str(Path(sys.executable).parent / "dvc"), "repro"], cwd=root,
                          env={**env_for(root), "PTSL_TRACKING": "off"}, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (root / "reports" / "results.md").is_file() and (root / MODEL).is_file()
    return root


@pytest.fixture
def project(ran, tmp_path) -> Path:
    """A copy of the ran project that one case may break."""
    return Path(shutil.copytree(ran, tmp_path / "p", symlinks=True))


def snapshot(root: Path, skip: set[str] = frozenset()) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> digest), exclusions aside."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if name in SKIP_FILES or rel in skip:
                continue
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, list[str]]:
    return {"removed": sorted(set(before) - set(after)), "added": sorted(set(after) - set(before)),
            "changed": sorted(k for k in before if k in after and before[k] != after[k])}


# ------------------------------------------------------------------------------- how to break


def set_param(*path: str, value: Any) -> Callable[[Path], None]:
    """Set one key of params.yaml (``set_param("sac", "batch_size", value=0)``)."""
    def apply(root: Path) -> None:
        params = yaml.safe_load((root / "params.yaml").read_text())
        node = params
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return apply


def edit_params(old: str, new: str) -> Callable[[Path], None]:
    """Replace text in params.yaml (for what YAML cannot express once loaded)."""
    def apply(root: Path) -> None:
        text = (root / "params.yaml").read_text()
        assert old in text
        (root / "params.yaml").write_text(text.replace(old, new, 1))
    return apply


def write(rel: str, data: bytes | Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Overwrite a file with bytes, or with a function of its bytes."""
    def apply(root: Path) -> None:
        path = root / rel
        path.write_bytes(data(path.read_bytes()) if callable(data) else data)
    return apply


def as_paco(**fields: Any) -> Callable[[Path], None]:
    """Make ``tiny_mtsac`` a PaCo experiment with ``fields`` added."""
    return set_param("experiments", "tiny_mtsac",
                     value={**EXPERIMENTS["tiny_mtsac"], "method": "paco", **fields})


def remove(rel: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).unlink()


def half(blob: bytes) -> bytes:
    return blob[: len(blob) // 2]


def drop_last_line(blob: bytes) -> bytes:
    return b"".join(blob.splitlines(keepends=True)[:-1])


def drop_train(blob: bytes) -> bytes:
    """A curve from before training success was recorded."""
    curve = pd.read_csv(io.BytesIO(blob))
    return curve.drop(columns=[c for c in curve.columns if c.startswith("train_")]).to_csv(
        index=False).encode()


def without_metric(blob: bytes) -> bytes:
    source = yaml.safe_load(blob)
    del source["metric"]
    return yaml.safe_dump(source, sort_keys=False).encode()


def unknown_statistic(blob: bytes) -> bytes:
    source = yaml.safe_load(blob)
    source["statistic"]["over_seeds"] = "median"
    return yaml.safe_dump(source, sort_keys=False).encode()


def short_vectors(blob: bytes) -> bytes:
    return json.dumps({k: v[:5] for k, v in json.loads(blob).items()}).encode()


# ------------------------------------------------------------------------------------- cases

VALIDATE = ["pipeline/validate.py"]
TRAIN = ["pipeline/train.py", "--exp", "tiny_ptsl", "--seed", "1"]
TRAIN_MTSAC = ["pipeline/train.py", "--exp", "tiny_mtsac", "--seed", "1"]
EVALUATE = ["pipeline/evaluate.py", "--exp", "tiny_mtsac", "--seed", "1"]
AGGREGATE = ["pipeline/aggregate.py"]


@dataclass(frozen=True)
class Case:
    """One malformed input: how to break it, what to run (a stage script and its arguments, or
    ``dvc`` and its), what the error line must say."""

    id: str
    breaks: Callable[[Path], None]
    script: list[str]
    says: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


CASES = [
    # wrong types
    Case("type-int", set_param("sac", "batch_size", value="big"), VALIDATE,
         ("sac.batch_size", "expected an integer")),
    Case("type-bool", set_param("env", "normalize_reward", value="yes"), TRAIN,
         ("env.normalize_reward", "expected true or false")),
    Case("type-list", set_param("seeds", value=5), VALIDATE, ("seeds", "expected a list")),
    # unknown keys
    Case("unknown-top-key", set_param("bogus", value=1), VALIDATE, ("bogus", "unknown key",
                                                                    "allowed:")),
    Case("unknown-nested-key", set_param("train", "stepz", value=3), AGGREGATE,
         ("train.stepz", "unknown key", "allowed: steps")),
    Case("unknown-preset-key", set_param("budgets", "paper", "train.stepz", value=5), VALIDATE,
         ("budgets.paper", "train.stepz", "no such key")),
    # unknown methods, benchmarks, modes
    Case("unknown-method", set_param("experiments", "tiny_mtsac", "method", value="sacx"),
         VALIDATE, ("experiments.tiny_mtsac.method", "allowed: mtsac")),
    Case("unknown-benchmark", set_param("experiments", "tiny_mtsac", "benchmark", value="mt11"),
         EVALUATE, ("experiments.tiny_mtsac.benchmark", "mt10, mt50")),
    Case("unknown-task", set_param("experiments", "tiny_ptsl", "benchmark", value="reach-v9"),
         TRAIN, ("experiments.tiny_ptsl.benchmark", "reach-v9")),
    Case("misspelt-residual-mode",
         set_param("experiments", "tiny_ptsl", "residual_mode", value="sums"), VALIDATE,
         ("experiments.tiny_ptsl.residual_mode", "allowed: none, sum, linear, project")),
    # PaCo's options (on an experiment made PaCo: no run of its own to build) and the published
    # PaCo runs' Q clip
    Case("unknown-paco-option", as_paco(num_parameter_set=5), VALIDATE,
         ("experiments.tiny_mtsac.num_parameter_set", "unknown key", "num_parameter_sets")),
    Case("zero-parameter-sets", as_paco(num_parameter_sets=0), TRAIN_MTSAC,
         ("experiments.tiny_mtsac.num_parameter_sets", ">= 1")),
    Case("negative-q-clip", set_param("sac", "q_clip", value=-5000), VALIDATE,
         ("sac.q_clip", "> 0")),
    Case("q-clip-not-a-number", set_param("sac", "q_clip", value="5k"), AGGREGATE,
         ("sac.q_clip", "expected a number")),
    # zero or negative sizes
    Case("zero-hidden-dim", set_param("experiments", "tiny_mtsac", "hidden_dim", value=0),
         VALIDATE, ("experiments.tiny_mtsac.hidden_dim", ">= 1")),
    Case("negative-batch", set_param("sac", "batch_size", value=-5), VALIDATE,
         ("sac.batch_size", ">= 1")),
    Case("zero-steps", set_param("train", "steps", value=0), VALIDATE, ("train.steps", ">= 1")),
    Case("negative-episodes", set_param("evaluate", "episodes", value=-1), EVALUATE,
         ("evaluate.episodes", ">= 1")),
    # seeds
    Case("empty-seeds", set_param("seeds", value=[]), VALIDATE,
         ("seeds", "non-empty list of distinct integers")),
    Case("duplicate-seeds", set_param("seeds", value=[1, 1]), AGGREGATE,
         ("seeds", "non-empty list of distinct integers")),
    Case("long-seeds-not-subset", set_param("long_seeds", value=[7]), VALIDATE,
         ("long_seeds", "subset of seeds")),
    # PTSL rank larger than the layer it compresses
    Case("pal-dim-top-level", set_param("pal_dim", value=1000), TRAIN,
         ("pal_dim", "<= 16", "tiny_ptsl")),
    Case("pal-dim-own", set_param("experiments", "tiny_ptsl", "pal_dim", value=17), VALIDATE,
         ("experiments.tiny_ptsl.pal_dim", "<= hidden_dim (16)")),
    # runs and tables
    Case("table-row-missing", set_param("tables", "short", "rows", value=["tiny_mtsac", "nope"]),
         AGGREGATE, ("tables.short.rows", "'nope'", "allowed:")),
    Case("run-listed-twice", set_param("runs", "plain", value=["tiny_mtsac", "tiny_mtsac"]),
         VALIDATE, ("runs.plain", "listed twice")),
    # YAML
    Case("yaml-syntax", edit_params("seeds:", "seeds: [1"), VALIDATE,
         ("params.yaml", "not valid YAML", "line")),
    Case("yaml-duplicate-key", edit_params("seeds:", "seeds: [2]\nseeds:"), AGGREGATE,
         ("params.yaml", "duplicate key 'seeds'")),
    # the machine's settings
    Case("unknown-device", lambda root: None, TRAIN, ("PTSL_DEVICE", "'gpu0'", "auto, cpu, cuda"),
         env={"PTSL_DEVICE": "gpu0"}),
    Case("bad-threads", lambda root: None, VALIDATE, ("PTSL_THREADS", "integer >= 0"),
         env={"PTSL_THREADS": "many"}),
    # task embeddings
    Case("embeddings-missing", remove(EMBEDDINGS), VALIDATE, (EMBEDDINGS, "not found")),
    Case("embeddings-corrupt", write(EMBEDDINGS, half), VALIDATE,
         (EMBEDDINGS, "task embeddings file", "not valid JSON")),
    Case("embeddings-wrong-shape", write(EMBEDDINGS, short_vectors), VALIDATE,
         (EMBEDDINGS, "'reach-v3'", "768")),
    # saved agent (the loader names the file)
    Case("model-truncated", write(MODEL, half), EVALUATE, (MODEL,)),
    Case("model-garbage", write(MODEL, b"not a checkpoint\n" * 64), EVALUATE, (MODEL,)),
    # what aggregate reads
    Case("eval-truncated", write("data/eval/tiny_mtsac-1.json", half), AGGREGATE,
         ("data/eval/tiny_mtsac-1.json", "evaluation record", "not valid JSON")),
    Case("eval-missing", remove("data/eval/tiny_ptsl-1.json"), AGGREGATE,
         ("data/eval/tiny_ptsl-1.json", "missing")),
    Case("curve-truncated", write("data/runs/tiny_ptsl-1/curve.csv", half), AGGREGATE,
         ("data/runs/tiny_ptsl-1/curve.csv", "training curve", "truncated")),
    Case("curve-last-row-lost", write("data/runs/tiny_mtsac-1/curve.csv", drop_last_line),
         AGGREGATE, ("data/runs/tiny_mtsac-1/curve.csv", "ends at step 10", "step 20")),
    Case("summary-corrupt", write("data/runs/tiny_mtsac-1/summary.json", b"{\"final_step\": "),
         AGGREGATE, ("data/runs/tiny_mtsac-1/summary.json", "run summary", "not valid JSON")),
    Case("curve-train-columns-lost", write("data/runs/tiny_mtsac-1/curve.csv", drop_train),
         AGGREGATE, ("data/runs/tiny_mtsac-1/curve.csv", "training curve",
                     "no columns ['train_episodes', 'train_success']")),
    Case("published-corrupt", write("data/published/care_paper.yaml", b"label: [unclosed\n"),
         AGGREGATE, ("data/published/care_paper.yaml", "published numbers file",
                     "not valid YAML")),
    Case("published-field-missing", write("data/published/ptsl_figure.yaml", without_metric),
         AGGREGATE, ("data/published/ptsl_figure.yaml", "published numbers file",
                     "metric: missing required key")),
    Case("published-statistic-unknown", write("data/published/scaling_baselines.yaml",
                                              unknown_statistic),
         AGGREGATE, ("data/published/scaling_baselines.yaml", "published numbers file",
                     "statistic.over_seeds: unknown value 'median'; allowed: mean, iqm")),
]


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


def _job(case: Case, root: Path) -> Job:
    return Job([sys.executable, case.script[0]], case.script[1:], root,
               {**env_for(root), **case.env})


@dataclass(frozen=True)
class Outcome:
    """A case's answer and its project's files before and after."""

    answer: Answer
    before: dict[str, str]
    after: dict[str, str]


@pytest.fixture(scope="module")
def outcomes(ran, tmp_path_factory) -> dict[str, Outcome]:
    """Every stage-script case, each in its own broken copy of the ran project, run in one
    process."""
    base = tmp_path_factory.mktemp("cases")
    roots, befores = {}, {}
    for case in CASES:
        root = Path(shutil.copytree(ran, base / case.id, symlinks=True))
        case.breaks(root)
        roots[case.id], befores[case.id] = root, snapshot(root)
    answers = run_in_one_process([_job(case, roots[case.id]) for case in CASES])
    return {case.id: Outcome(answer, befores[case.id], snapshot(roots[case.id]))
            for case, answer in zip(CASES, answers)}


def _check_one_line(proc: Answer, says: tuple[str, ...]) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines and lines[-1].startswith("error: "), proc.stderr[-3000:]
    assert len(error_lines(proc.stderr)) == 1, proc.stderr
    for text in says:
        assert text in lines[-1], lines[-1]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_stage_script_refuses_bad_input_and_changes_nothing(outcomes, case):
    got = outcomes[case.id]
    _check_one_line(got.answer, case.says)
    assert got.after == got.before, changes(got.before, got.after)


@pytest.mark.parametrize("case_id", ["model-truncated", "unknown-device"])
def test_a_case_answers_alone_as_in_the_shared_process(outcomes, project, case_id):
    """The shared process is faithful: a case whose stage loads a saved agent, and one whose
    error comes from the environment, answer the same from a process of their own."""
    case = next(c for c in CASES if c.id == case_id)
    case.breaks(project)
    before = snapshot(project)
    alone = run_alone(_job(case, project))
    _check_one_line(alone, case.says)
    shared = outcomes[case_id].answer
    assert (alone.returncode, error_lines(alone.stderr)) == (shared.returncode,
                                                            error_lines(shared.stderr))
    assert snapshot(project) == before


def test_there_are_enough_cases_of_every_kind():
    assert len(CASES) >= 25
    assert {c.script[0] for c in CASES} == {"pipeline/validate.py", "pipeline/train.py",
                                             "pipeline/evaluate.py", "pipeline/aggregate.py"}


# ------------------------------------------------------------------------------ through DVC


#: Cases whose ``script`` is DVC's command line.
DVC_CASES = [
    Case("repro-duplicate-seeds", set_param("seeds", value=[1, 1]), ["dvc", "repro"],
         ("seeds", "distinct")),
    Case("repro-stage-table-row", set_param("tables", "short", "rows", value=["nope"]),
         ["dvc", "repro", "train@tiny_mtsac-1"], ("tables.short.rows", "'nope'")),
    Case("repro-aggregate-pal-dim", set_param("pal_dim", value=1000),
         ["dvc", "repro", "aggregate"], ("pal_dim", "<= 16")),
    Case("repro-corrupt-embeddings", write(EMBEDDINGS, half), ["dvc", "repro"],
         (EMBEDDINGS, "not valid JSON")),
    Case("exp-run-pal-dim", lambda root: None, ["dvc", "exp", "run", "-S", "pal_dim=1000"],
         ("pal_dim", "<= 16")),
    Case("exp-run-residual", lambda root: None,
         ["dvc", "exp", "run", "-S", "+experiments.tiny_ptsl.residual_mode=sums"],
         ("experiments.tiny_ptsl.residual_mode", "allowed: none, sum")),
]


@pytest.mark.parametrize("case", DVC_CASES, ids=[c.id for c in DVC_CASES])
def test_dvc_stops_at_validate_and_removes_no_output(project, case):
    """DVC removes a stage's outputs just before it runs the stage; validate runs first and
    fails, so no stage runs and nothing is removed (the report outputs are not in the cache)."""
    case.breaks(project)
    # `dvc exp run -S` writes the new value into params.yaml itself: the one file allowed to change.
    skip = {"params.yaml"} if case.script[1] == "exp" else set()
    before = snapshot(project, skip)
    proc = subprocess.run([str(Path(sys.executable).parent / "dvc"), *case.script[1:]],
                          cwd=project, env=env_for(project), capture_output=True, text=True,
                          timeout=300)
    after = snapshot(project, skip)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-2000:]
    assert "Traceback" not in output, output[-3000:]
    lines = error_lines(output)
    assert len(lines) == 1, output[-3000:]
    for text in case.says:
        assert text in lines[0], lines[0]
    assert "failed to reproduce 'validate'" in output
    assert "Running stage 'train" not in output and "Running stage 'aggregate'" not in output
    assert after == before, changes(before, after)


def test_grid_checks_params_before_anything(project):
    """The grid's workers skip the validate stage (`dvc repro --single-item`), so the grid runs
    the same check itself before it asks DVC or starts Ray."""
    set_param("pal_dim", value=1000)(project)
    before = snapshot(project)
    proc = subprocess.run([sys.executable, "-m", "ptsl.ops.grid", "--workers", "1"], cwd=project,
                          env=env_for(project), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: pal_dim: must be <= 16")
    assert "on Ray" not in proc.stdout
    assert snapshot(project) == before


def test_reports_are_swapped_in_whole(project):
    """aggregate builds its reports aside and swaps each output in: the files of a table that is
    gone go with the old folder, and a failure while building leaves every report as it was."""
    from ptsl.ops.params import load_params, parse_params
    from ptsl.report.inputs import Published, RunRecords, collect
    from ptsl.report.rollouts import collect_videos
    from ptsl.report.tables import write_reports

    params = load_params(project / "params.yaml")
    data, reports = project / "data", project / "reports"
    records = collect(params, data / "runs", data / "eval")
    videos = collect_videos(params, data / "videos")
    published = Published.load(data / "published")
    raw = yaml.safe_load((project / "params.yaml").read_text())
    del raw["tables"]["long"]
    write_reports(parse_params(raw), records, published, reports, videos)
    assert sorted(p.name for p in (reports / "tables").iterdir()) == ["short.csv", "short.md"]
    assert not list((reports / "figures").glob("long_*"))
    assert (reports / "benchmarks.json").is_file()  # check_env's output: not aggregate's to touch
    before = snapshot(project)
    # Curves of one experiment only: its table cannot be built (a failure after reading).
    partial = RunRecords(evals=records.evals,
                         curves=records.curves[records.curves["experiment"] == "tiny_mtsac"])
    with pytest.raises(ValueError, match="tiny_ptsl"):
        write_reports(params, partial, published, reports, videos)
    assert snapshot(project) == before
    assert not list(reports.glob(".aggregate-*"))  # no staging folder left
