"""The package's version: its one home (pyproject.toml reads it, and every output record carries it)."""

__version__ = "0.1.0"
