"""``truepeak moe tune``: search the MoE kernels' configurations per GPU, expert shape, weight format, activations
and tokens-per-expert bucket, and write a tuned table that :class:`~truepeak.kernels.moe_triton.FusedMoE` loads.

Modules: :mod:`~truepeak.bench.moe_tune.config` (:class:`TuneConfig`, the run's settings, pure),
:mod:`~truepeak.bench.moe_tune.search` (:func:`run_tune`, the search; torch inside). The candidates, their
shared-memory fit and the refusals are in :mod:`truepeak.kernels.moe_triton.search_space`, the table and its loader in
:mod:`truepeak.kernels.moe_triton.tuned` (both pure).
"""

from truepeak.bench.moe_tune.config import TuneConfig, parse_weights
from truepeak.bench.moe_tune.search import TuneProgress, TuneResult, git_commit, run_tune

__all__ = ["TuneConfig", "TuneProgress", "TuneResult", "git_commit", "parse_weights", "run_tune"]
