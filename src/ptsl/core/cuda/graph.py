"""The CUDA side of :class:`ptsl.core.cuda.step.CapturedStep`: the only code of the GPU path that
calls CUDA itself (tests marked ``cuda`` run it; everything around it runs on CPU)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


class CudaBackend:
    """Warm-up and capture on one side stream, as the CUDA-graph recipe asks.

    The side stream waits for the current one (the buffer's latest ``add`` must land before a
    step reads it) and the current one waits for the side stream's work after each call. Every
    generator the step draws from is registered with the graph, so each replay advances it.
    """

    def __init__(self, device: torch.device) -> None:
        self.side = torch.cuda.Stream(device)

    def eager(self, fn: Callable[[], None]) -> None:
        current = torch.cuda.current_stream(self.side.device)
        self.side.wait_stream(current)
        with torch.cuda.stream(self.side):
            fn()
        current.wait_stream(self.side)

    def capture(self, fn: Callable[[], None],
                generators: Sequence[torch.Generator]) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        for generator in generators:
            graph.register_generator_state(generator)
        current = torch.cuda.current_stream(self.side.device)
        self.side.wait_stream(current)
        try:
            with torch.cuda.graph(graph, stream=self.side):
                fn()
        except BaseException:
            # torch's graph.__exit__ ends the capture, but when that raises (after any error
            # inside the capture) it never leaves the side stream: make the stream current
            # before the capture current again, so the caller's next kernels go where they did.
            torch.cuda.set_stream(current)
            raise
        current.wait_stream(self.side)
        return graph
