"""The speed benchmark (``python -m ptsl.tools.bench``); see :mod:`ptsl.tools.bench.__main__`."""
