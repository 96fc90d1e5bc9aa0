"""Developer tools that no stage runs: the speed benchmark (``python -m ptsl.tools.bench``), the
parameter counts behind the matched hidden sizes (``python -m ptsl.tools.counting``) and the
learning check (``python -m ptsl.tools.learning_check``). They may import any layer."""
