"""Collective communication, the pure model: nccl-tests' algbw / busbw definitions and the α–β model
(:mod:`truepeak.comm.model`), and the sizes and cases of a sweep (:mod:`truepeak.comm.sweep`). No torch, no numpy;
nothing here imports ``bench`` or ``report``.

The ``truepeak comm`` benchmark that measures them (torch.distributed workers started through torchrun) is
:mod:`truepeak.bench.comm`; its tables and summary.md are rendered by :mod:`truepeak.report.comm`."""

from truepeak.comm.model import (
    ALIASES, DTYPE_BYTES, INTERCONNECTS, MEASURED_OPS, OPS, CollectiveModel, algbw_from_busbw, busbw_factor,
    busbw_from_algbw, canonical_dtype, canonical_op, count_for_bytes, default_model, dtype_bytes, fit_alpha_beta,
    load_fits, models_from_records, step_time, total_bytes,
)

__all__ = [
    "ALIASES", "DTYPE_BYTES", "INTERCONNECTS", "MEASURED_OPS", "OPS", "CollectiveModel", "algbw_from_busbw",
    "busbw_factor", "busbw_from_algbw", "canonical_dtype", "canonical_op", "count_for_bytes", "default_model",
    "dtype_bytes", "fit_alpha_beta", "load_fits", "models_from_records", "step_time", "total_bytes",
]
