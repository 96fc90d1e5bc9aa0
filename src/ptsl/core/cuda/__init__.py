"""The GPU path: the same agent and the same update, run so that a GPU stays busy.

On CUDA the training loop makes one call, :func:`accelerate`, which

- gives the agent the task selections with static shapes
  (:class:`~ptsl.core.cuda.task_index.StaticTaskIndex`: no host read, no sort) and capturable
  Adam (step counters on the device);
- keeps the replay buffer on the device (:class:`~ptsl.core.cuda.buffer.DeviceReplayBuffer`)
  and draws batches there (:class:`~ptsl.core.cuda.buffer.DeviceSampler`);
- runs every update as the static step (:class:`~ptsl.core.cuda.step.UpdateStep`), captured
  once as a CUDA graph and replayed (:class:`~ptsl.core.cuda.step.CapturedStep` over
  :class:`~ptsl.core.cuda.graph.CudaBackend`), or eagerly with ``PTSL_GRAPH=0``;
- for a seed group (:func:`ptsl.core.loop.train_group`), :func:`group_update` runs every seed's
  update as one step (:class:`~ptsl.core.cuda.step.GroupStep`), captured as one graph.

The maths is the agent's own :meth:`~ptsl.core.agent.sac.MultiTaskSAC.update`; CPU tests run all
of this but :mod:`ptsl.core.cuda.graph` and compare it with the update bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..agent.group import SeedGroup
from ..agent.sac import MultiTaskSAC
from ..config import SACConfig
from .buffer import DeviceReplayBuffer, DeviceSampler
from .step import Backend, CapturedStep, GroupStep, UpdateStep
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


class GroupUpdate:
    """One update of every seed of a group per call, returning each seed's losses; ``path`` as
    :class:`DeviceUpdate`'s."""

    def __init__(self, step: GroupStep, runner: CapturedStep | GroupStep) -> None:
        self.step, self.runner = step, runner
        self.path = "captured" if isinstance(runner, CapturedStep) else "static"

    def __call__(self) -> list[dict]:
        self.runner()
        return self.step.losses()


def group_update(updates: Sequence[DeviceUpdate], graph: bool,
                 backend: Backend | None = None) -> GroupUpdate:
    """The seeds' updates (each from :func:`accelerate`, before any update) as one: each seed
    gathers its batch from its own buffer, then one update of all (:class:`SeedGroup`), captured
    as one CUDA graph when ``graph`` (registering every seed's generators). Each seed's
    :class:`DeviceUpdate` stays as it was, for a seed that runs alone."""
    step = GroupStep([u.step for u in updates], SeedGroup([u.step.agent for u in updates]))
    if not graph:
        return GroupUpdate(step, step)
    if backend is None:
        from .graph import CudaBackend

        backend = CudaBackend(step.steps[0].agent.device)
    return GroupUpdate(step, CapturedStep(step, backend, step.generators(), step.versions))
