"""The machine's choices (device, threads, graph capture, environment stepping) come from
environment variables, are checked with one clear line, and never enter params.yaml; on CUDA the
runtime keeps float32 products in full FP32 and records the precision settings."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import yaml

from ptsl.core.errors import ConfigError
from ptsl.core.runtime import Runtime

from ..conftest import ROOT


def test_defaults_and_values():
    assert Runtime.from_env({}) == Runtime("auto", 0, True, "auto")
    rt = Runtime.from_env({"PTSL_DEVICE": "CPU", "PTSL_THREADS": "2", "PTSL_GRAPH": "0"})
    assert rt == Runtime("cpu", 2, False) and rt.torch_device().type == "cpu"


@pytest.mark.parametrize("env, message", [
    ({"PTSL_DEVICE": "tpu"}, "PTSL_DEVICE: unknown device 'tpu'; allowed: auto, cpu, cuda"),
    ({"PTSL_THREADS": "many"}, "PTSL_THREADS: expected an integer >= 0, got 'many'"),
    ({"PTSL_THREADS": "-1"}, "PTSL_THREADS: must be >= 0, got -1"),
    ({"PTSL_FAST": "0"}, "PTSL_FAST: retired, the update has one path"),
    ({"PTSL_GRAPH": "yes please"}, "PTSL_GRAPH: expected 1 or 0, got 'yes please'"),
    ({"PTSL_VECTOR": "gpu"}, "PTSL_VECTOR: unknown mode 'gpu'; allowed: auto, sync, async"),
    ({"PTSL_CUDA_WAIT": "sleep"}, "PTSL_CUDA_WAIT: unknown mode 'sleep'; allowed: block, spin"),
])
def test_bad_values_name_the_variable(env, message):
    with pytest.raises(ConfigError, match=message):
        Runtime.from_env(env)


def test_cuda_without_a_gpu_is_one_clear_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="PTSL_DEVICE: 'cuda' asked for but torch sees no CUDA"):
        Runtime("cuda").torch_device()


def test_machine_choices_are_not_params():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert "device" not in params["train"] and "torch_threads" not in params["train"]
    assert "vector" not in params["env"]


def test_the_wait_for_a_cuda_device():
    """Asleep by default; ``spin`` as CUDA waits by default; on a CPU tensor the read is a plain
    copy whichever is asked for."""
    import torch

    from ptsl.core.agent.sac import to_host

    assert Runtime.from_env({}).wait == "block"
    assert Runtime.from_env({"PTSL_CUDA_WAIT": " Spin "}).wait == "spin"
    assert "cuda_wait" not in Runtime(device="cpu").describe()
    t = torch.arange(6.0)
    assert torch.equal(to_host(t, blocking=True), t) and torch.equal(to_host(t, False), t)


def test_graph_and_vector_switches():
    rt = Runtime.from_env({"PTSL_GRAPH": "0", "PTSL_VECTOR": "ASYNC"})
    assert rt.graph is False and rt.vector_mode(10) == "async"
    assert Runtime(vector="sync").vector_mode(50) == "sync"
    # auto: worker processes only for several tasks, and only with a core per task to spare.
    assert Runtime().vector_mode(1) == "sync"
    assert Runtime().vector_mode(10_000) == "sync"
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert Runtime().update_path(cpu) == "host" == Runtime(graph=False).update_path(cpu)
    assert Runtime().update_path(cuda) == "captured"
    assert Runtime(graph=False).update_path(cuda) == "static"


def test_full_fp32_overrides_a_library_and_names_the_cublas_override(monkeypatch, capsys):
    """On CUDA the runtime sets the float32 matmul precision back to highest (a library may have
    asked for TF32), records it, and warns in one line about the cuBLAS override variable, which
    no torch setting can undo."""
    from ptsl.core.runtime import TF32_OVERRIDE_ENV, full_fp32, precision

    monkeypatch.delenv(TF32_OVERRIDE_ENV, raising=False)
    torch.set_float32_matmul_precision("high")
    try:
        assert precision()["matmul_precision"] == "high"
        full_fp32()
        record = precision()
        assert record["matmul_precision"] == "highest" and record["tf32_cublas"] == "False"
        assert record["tf32_cublas_override"] == "unset" and capsys.readouterr().err == ""
        monkeypatch.setenv(TF32_OVERRIDE_ENV, "1")
        full_fp32()
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith(f"warning: {TF32_OVERRIDE_ENV}=1 makes")
        assert precision()["tf32_cublas_override"] == "1"
    finally:
        torch.set_float32_matmul_precision("highest")
    rt = Runtime(device="cpu").describe()
    assert rt["update_path"] == "host" and rt["torch_device"] == "cpu"
    assert {"matmul_precision", "tf32_cublas", "tf32_cudnn", "tf32_cublas_override"} <= set(rt)


def test_a_params_file_with_the_old_vector_key_says_what_replaced_it(raw_params):
    from ptsl.ops.params import parse_params

    raw_params["env"]["vector"] = "async"
    with pytest.raises(ConfigError, match=r"^env\.vector: no longer a param .*PTSL_VECTOR="):
        parse_params(raw_params)


def test_stage_reports_a_bad_device_in_one_line(tmp_path):
    env = {"PTSL_DEVICE": "gpu0", "PTSL_TRACKING": "off", "PATH": str(ROOT / ".venv" / "bin")}
    proc = subprocess.run([sys.executable, "pipeline/train.py", "--exp", "mt10_mtsac", "--seed",
                           "1", "--out", str(tmp_path / "runs")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: PTSL_DEVICE: unknown device 'gpu0'; allowed: auto, "
                                   "cpu, cuda")
    assert not (tmp_path / "runs").exists()


def test_keeping_freed_memory_applies_on_glibc_and_changes_no_number():
    """The allocator setting applies where glibc is the C library, and an update computed after
    it equals one computed before (it changes where memory comes from, nothing else)."""
    import platform

    import torch

    from ptsl.core.runtime import keep_freed_memory

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(39, 400), torch.nn.ReLU(inplace=True),
                              torch.nn.Linear(400, 1))
    x = torch.randn(1280, 39)
    before = torch.autograd.grad(net(x).square().mean(), list(net.parameters()))
    code = ("import sys; sys.path.insert(0, 'src'); from ptsl.core.runtime import keep_freed_memory; "
            "print(keep_freed_memory())")
    applied = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert applied == str(platform.libc_ver()[0] == "glibc")
    keep_freed_memory()
    after = torch.autograd.grad(net(x).square().mean(), list(net.parameters()))
    for b, a in zip(before, after):
        assert torch.equal(b, a)
