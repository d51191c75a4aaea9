"""Command-line interface: ``truepeak specs | efficiency | run | ... | serve``. Each command module registers itself on ``app``."""

from truepeak.cli.app import app, main
from truepeak.cli import efficiency, run, specs  # noqa: F401,E402  (registers the commands)
from truepeak.cli import compare, report  # noqa: F401,E402  (registers the commands)
from truepeak.cli import comm  # noqa: F401,E402  (registers `truepeak comm`)
from truepeak.cli import peak  # noqa: F401,E402  (registers `truepeak peak`)
from truepeak.cli import moe  # noqa: F401,E402  (registers `truepeak moe` and its `plan`)
from truepeak.cli import moe_bench  # noqa: F401,E402  (registers `truepeak moe bench`)
from truepeak.cli import serve  # noqa: F401,E402  (registers `truepeak serve`)
from truepeak.cli import moe_tune  # noqa: F401,E402  (registers `truepeak moe tune`)

__all__ = ["app", "main"]
