"""The accelerator spec catalog, name lookup and headline-claim checking (pure Python; no torch).

- :func:`load_catalog` loads ``data/accelerators.toml`` (every number with its source; dense and sparse kept apart).
- :func:`get_accelerator` / :func:`match_device_name` turn a marketing name, a device string or an alias into an
  :class:`Accelerator` without substring traps.
- :func:`check_claim` says whether a headline such as ``"4 PFLOPS FP4"`` is a dense or a 2:4-sparse figure.
- :func:`check_shared_memory` rejects a kernel config that needs more shared memory per block than the GPU allows
  (docs/method.md, 'Shared memory per block').

Also here, imported on demand: :mod:`~truepeak.hardware.detect` (the device `truepeak run` measures),
:mod:`~truepeak.hardware.cpu` (the estimated CPU peak) and :mod:`~truepeak.hardware.nvml` (NVML, initialised once per
process, and each GPU's static facts, read once).
"""

from truepeak.hardware.catalog import Accelerator, Architecture, Catalog, Peak, Sourced, load_catalog
from truepeak.hardware.claims import ClaimVerdict, check_claim
from truepeak.hardware.limits import check_shared_memory
from truepeak.hardware.lookup import get_accelerator, match_device_name

__all__ = [
    "Accelerator",
    "Architecture",
    "Catalog",
    "ClaimVerdict",
    "Peak",
    "Sourced",
    "check_claim",
    "check_shared_memory",
    "get_accelerator",
    "load_catalog",
    "match_device_name",
]
