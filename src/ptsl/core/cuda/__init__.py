"""The GPU path: the same agent and the same update, run so that a GPU stays busy.

On CUDA the training loop makes one call, :func:`accelerate`, which

- gives the agent the task selections with static shapes
  (:class:`~ptsl.core.cuda.task_index.StaticTaskIndex`: no host read, no sort) and capturable
  Adam (step counters on the device);
- keeps the replay buffer on the device (:class:`~ptsl.core.cuda.buffer.DeviceReplayBuffer`)
  and draws batches there (:class:`~ptsl.core.cuda.buffer.DeviceSampler`);
- runs every update as the static step (:class:`~ptsl.core.cuda.step.UpdateStep`), captured
  once as a CUDA graph and replayed (:class:`~ptsl.core.cuda.step.CapturedStep` over
  :class:`~ptsl.core.cuda.graph.CudaBackend`), or eagerly with ``PTSL_GRAPH=0``.

The maths is the agent's own :meth:`~ptsl.core.agent.sac.MultiTaskSAC.update`; CPU tests run all
of this but :mod:`ptsl.core.cuda.graph` and compare it with the update bit for bit.
"""

from __future__ import annotations

from ..agent.sac import MultiTaskSAC
from ..config import SACConfig
from .buffer import DeviceReplayBuffer, DeviceSampler
from .step import Backend, CapturedStep, UpdateStep
from .task_index import StaticTaskIndex


class DeviceUpdate:
    """One update per call on the device buffer, returning its losses (0-dim device tensors).

    ``path`` names how it runs: ``captured`` (a CUDA graph) or ``static`` (the same static step,
    eager)."""

    def __init__(self, step: UpdateStep, runner: CapturedStep | UpdateStep) -> None:
        self.step, self.runner = step, runner
        self.path = "captured" if isinstance(runner, CapturedStep) else "static"

    def __call__(self) -> dict:
        self.runner()
        return self.step.losses()


def accelerate(agent: MultiTaskSAC, sac: SACConfig, obs_dim: int, action_dim: int, seed: int,
               graph: bool, backend: Backend | None = None
               ) -> tuple[DeviceReplayBuffer, DeviceUpdate]:
    """Set ``agent`` (on a CUDA device, before its first update) up for the GPU path; returns
    the run's replay buffer on the device (sampling generator seeded with ``seed``) and its
    update, captured as a CUDA graph when ``graph``. ``backend`` replaces the CUDA one (the CPU
    tests run the whole path with a stand-in); without a GPU, Adam stays non-capturable, which
    torch allows only on one."""
    if agent._optimizers is not None:
        raise RuntimeError("accelerate() must come before the agent's first update (Adam is "
                           "built capturable)")
    agent.task_index = StaticTaskIndex
    if agent.device.type == "cuda":
        agent.adam_options = {**agent.adam_options, "capturable": True}
    buffer = DeviceReplayBuffer(sac.buffer_capacity, obs_dim, action_dim, agent.device, seed)
    step = UpdateStep(agent, buffer, sac.batch_size, DeviceSampler(buffer, buffer.generator))
    if not graph:
        return buffer, DeviceUpdate(step, step)
    if backend is None:
        from .graph import CudaBackend  # the only module that calls CUDA itself

        backend = CudaBackend(agent.device)
    return buffer, DeviceUpdate(step, CapturedStep(step, backend, step.generators(),
                                                   step.versions))
