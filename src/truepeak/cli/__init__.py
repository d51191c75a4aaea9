"""Command-line interface: ``truepeak specs | efficiency | run``. Each command module registers itself on ``app``."""

from truepeak.cli.app import app, main
from truepeak.cli import efficiency, run, specs  # noqa: F401,E402  (registers the commands)

__all__ = ["app", "main"]
