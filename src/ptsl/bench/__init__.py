"""The speed benchmark (``python -m ptsl.bench``); see :mod:`ptsl.bench.__main__`."""
