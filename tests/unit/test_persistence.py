"""Safe loading: model.pt and resume checkpoints are read weights-only after their checksum is
verified; a file from another config or project version is refused naming the field."""

from __future__ import annotations

import hashlib
import io
import os

import numpy as np
import pytest
import torch

from ptsl.core import persistence as artifacts
from ptsl.core.agent.builders import Shapes, build_agent
from ptsl.core.config import EnvConfig, ExperimentConfig, RunConfig, SACConfig, TrainConfig
from ptsl.core.errors import CorruptFileError
from ptsl.core.persistence import load_agent, save_agent
from ptsl.core.persistence import ResumeCheckpoints

SHAPES = Shapes(obs_dim=39, action_dim=4, num_tasks=3)


def _cfg(hidden_dim: int = 32) -> RunConfig:
    e = ExperimentConfig(benchmark="mt10", method="mtsac", hidden_dim=hidden_dim, num_layers=2)
    return RunConfig(name="t", seed=1, experiment=e, env=EnvConfig(),
                     sac=SACConfig(batch_size=16),
                     train=TrainConfig(steps=10, eval_every=5, checkpoint_every=5))


@pytest.fixture
def saved(tmp_path):
    agent = build_agent(_cfg(), SHAPES, ("a", "b", "c"))
    path = tmp_path / "model.pt"
    save_agent(agent, path)
    return agent, path


def test_round_trip_is_exact_and_bytes_are_reproducible(saved, tmp_path):
    agent, path = saved
    loaded = load_agent(path, expect=_cfg())
    for (k, a), (_, b) in zip(agent.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), k
    save_agent(agent, tmp_path / "again" / "model.pt")
    assert (tmp_path / "again" / "model.pt").read_bytes() == path.read_bytes()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert artifacts.checksum_path(path).read_text().strip() == digest


def test_altered_or_truncated_file_is_refused(saved):
    _, path = saved
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"model\.pt: saved agent is unreadable \(SHA-256 "
                                               r".* does not match model\.pt\.sha256"):
        load_agent(path)
    path.write_bytes(bytes(data[:1000]))
    with pytest.raises(CorruptFileError, match="truncated or altered"):
        load_agent(path)


def test_missing_checksum_is_refused(saved):
    _, path = saved
    artifacts.checksum_path(path).unlink()
    with pytest.raises(CorruptFileError, match=r"checksum file model\.pt\.sha256 is missing"):
        load_agent(path)


class _Payload:
    """A pickle that would run code when unpickled by a plain ``torch.load``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_pickled_code_is_never_run_even_with_a_matching_checksum(tmp_path):
    marker = tmp_path / "code-ran"
    path = tmp_path / "model.pt"
    buf = io.BytesIO()
    torch.save({"format": artifacts.FORMAT, "ptsl_version": artifacts.project_version(),
                "meta_json": "{}", "model": _Payload(str(marker))}, buf)
    path.write_bytes(buf.getvalue())
    artifacts.checksum_path(path).write_text(hashlib.sha256(buf.getvalue()).hexdigest())
    with pytest.raises(CorruptFileError, match="not a weights-only file"):
        load_agent(path)
    assert not marker.exists()


def test_other_config_is_refused_naming_the_field(saved):
    _, path = saved
    with pytest.raises(CorruptFileError, match=r"trained under another config: "
                                               r"experiment\.hidden_dim: 32 there, 64 here"):
        load_agent(path, expect=_cfg(hidden_dim=64))


def test_other_project_version_is_refused(saved, monkeypatch):
    _, path = saved
    monkeypatch.setattr(artifacts, "project_version", lambda: "99.0")
    with pytest.raises(CorruptFileError, match=r"written by another project version "
                       r"\(ptsl_version: '\S+' there, '99\.0' here\)"):
        load_agent(path)


def test_numpy_state_keeps_its_dtypes(tmp_path):
    state = {"rows": np.arange(6, dtype=np.float32).reshape(2, 3), "mean": np.float64(0.25),
             "task": np.array([1, 2], dtype=np.int64), "rng": np.random.default_rng(3)
             .bit_generator.state, "curve": [{"step": 0, "success": 0.5}]}
    artifacts.save(tmp_path / "s.pt", state, "test state")
    back = artifacts.load(tmp_path / "s.pt", "test state")
    assert back["rows"].dtype == np.float32 and np.array_equal(back["rows"], state["rows"])
    assert type(back["mean"]) is np.float64 and back["mean"] == 0.25
    assert back["task"].dtype == np.int64 and back["rng"] == state["rng"]
    assert back["curve"] == state["curve"]


def test_resume_checkpoint_from_another_version_is_not_used(tmp_path, monkeypatch, capsys):
    cfg = _cfg()
    ckpt = ResumeCheckpoints(tmp_path, cfg)
    ckpt.save(5, {"curve": [], "device": "cpu"})
    assert ckpt.load("cpu")["step"] == 5
    monkeypatch.setattr(artifacts, "project_version", lambda: "99.0")
    assert ckpt.load("cpu") is None
    assert "not resuming from this checkpoint, it was made under another ptsl_version: " \
           in capsys.readouterr().err


def test_resume_checkpoint_made_by_other_code_is_not_used(tmp_path, monkeypatch, capsys):
    """A run resumed after an edit of the code that computes it would be a run of neither
    version: the checkpoint records the code's digest, and another digest starts afresh."""
    cfg = _cfg()
    ckpt = ResumeCheckpoints(tmp_path, cfg)
    ckpt.save(5, {"curve": [], "device": "cpu"})
    assert ckpt.load("cpu")["code"] == artifacts.code_digest()
    monkeypatch.setattr(artifacts, "code_digest", lambda: "0123456789abcdef")
    assert ckpt.load("cpu") is None
    assert "it was made under another code: " in capsys.readouterr().err


def test_resume_falls_back_to_an_older_checkpoint_when_the_newest_is_corrupt(tmp_path, capsys):
    cfg = _cfg()
    ckpt = ResumeCheckpoints(tmp_path, cfg)
    ckpt.save(5, {"curve": [], "device": "cpu"})
    older = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    ckpt.save(10, {"curve": [], "device": "cpu"})  # deletes the older one after writing the new one
    for name, data in older.items():  # as if the deletion had not happened (kill)
        (tmp_path / name).write_bytes(data)
    newest = tmp_path / f"t-1-{cfg.key()}-000000010.pt"
    newest.write_bytes(newest.read_bytes()[:100])
    assert ckpt.load("cpu")["step"] == 5
    assert "resume checkpoint is unreadable" in capsys.readouterr().err


def test_checkpoint_of_another_config_is_named(tmp_path, capsys):
    ResumeCheckpoints(tmp_path, _cfg()).save(5, {"curve": [], "device": "cpu"})
    other = _cfg().model_copy(update=dict(train=TrainConfig(steps=20, eval_every=5,
                                                             checkpoint_every=5)))
    assert ResumeCheckpoints(tmp_path, other).load("cpu") is None
    assert "is a checkpoint of t-1 under another config" in capsys.readouterr().err
