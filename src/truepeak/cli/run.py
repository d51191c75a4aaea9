"""`truepeak run` (being written)."""

from truepeak.cli.app import app  # noqa: F401
