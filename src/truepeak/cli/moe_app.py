"""The ``truepeak moe`` sub-app (:data:`moe_app`): ``plan`` (:mod:`truepeak.cli.moe`), ``bench``
(:mod:`truepeak.cli.moe_bench`) and ``tune`` (:mod:`truepeak.cli.moe_tune`) register on it."""

from __future__ import annotations

import typer

from truepeak.cli.app import app

moe_app = typer.Typer(name="moe", no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                      help="MoE decode: predict a step per layout and batch from a Hugging Face config (truepeak moe "
                           "plan, no GPU needed); time one layer's routed experts on this GPU (truepeak moe bench); "
                           "tune our MoE kernel's configurations on this GPU (truepeak moe tune).")
app.add_typer(moe_app, name="moe")

__all__ = ["moe_app"]
