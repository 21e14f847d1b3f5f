"""tunebench: an experiment-tracking benchmark harness for learning-based deployment optimization."""

__version__ = "0.1.0"
