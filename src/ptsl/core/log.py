"""What the training loop reports while it runs, as a small interface: the loop knows no tracking
store and no metric names; :class:`ptsl.ops.tracking.Tracker` implements it for MLflow."""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence


class RunLog(Protocol):
    """Where a run's progress goes."""

    #: An id of this log's run, kept in resume checkpoints so that a resumed run can link to the
    #: run that wrote the checkpoint ("" when there is none).
    run_id: str

    def evaluation(self, step: int, row: Mapping[str, float]) -> None:
        """One evaluation: the curve row of ``step`` (``success``, ``return``, per task...)."""

    def losses(self, step: int, means: Mapping[str, float]) -> None:
        """Mean losses (and temperature, entropy) of the updates since the last report."""

    def training_episode(self, step: int, success: Mapping[str, float]) -> None:
        """A training episode that ended at vector step ``step``: each task's success at any
        step of it, under the behaviour policy (the reference's ``train/success``)."""

    def resumed(self, step: int, curve: Sequence[Mapping[str, float]],
                previous_run: str | None) -> None:
        """The run resumed at ``step`` from a checkpoint that ``previous_run`` wrote, with the
        evaluation ``curve`` it held."""

    def flush(self) -> None:
        """Send what is buffered (the loop flushes at every evaluation and at the end)."""


class NoLog:
    """A :class:`RunLog` that keeps nothing."""

    run_id = ""

    def evaluation(self, step: int, row: Mapping[str, float]) -> None: ...
    def losses(self, step: int, means: Mapping[str, float]) -> None: ...
    def training_episode(self, step: int, success: Mapping[str, float]) -> None: ...
    def resumed(self, step: int, curve: Sequence[Mapping[str, float]],
                previous_run: str | None) -> None: ...
    def flush(self) -> None: ...
