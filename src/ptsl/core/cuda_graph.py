"""The CUDA side of :class:`ptsl.core.update_step.CapturedStep`: the only code of the captured
update that needs a GPU (tests marked ``cuda`` run it; everything around it runs on CPU)."""

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
        with torch.cuda.graph(graph, stream=self.side):
            fn()
        current.wait_stream(self.side)
        return graph
