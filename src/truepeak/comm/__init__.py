"""Collective communication: nccl-tests definitions, the α–β model (:mod:`truepeak.comm.model`, pure Python) and the
``truepeak comm`` benchmark (:mod:`truepeak.comm.bench`, torch.distributed workers started through torchrun)."""

from truepeak.comm.model import (
    ALIASES, DTYPE_BYTES, INTERCONNECTS, MEASURED_OPS, OPS, CollectiveModel, algbw_from_busbw, busbw_factor,
    busbw_from_algbw, canonical_op, count_for_bytes, default_model, dtype_bytes, fit_alpha_beta, load_fits,
    models_from_records, step_time, total_bytes,
)

__all__ = [
    "ALIASES", "DTYPE_BYTES", "INTERCONNECTS", "MEASURED_OPS", "OPS", "CollectiveModel", "algbw_from_busbw",
    "busbw_factor", "busbw_from_algbw", "canonical_op", "count_for_bytes", "default_model", "dtype_bytes",
    "fit_alpha_beta", "load_fits", "models_from_records", "step_time", "total_bytes",
]
