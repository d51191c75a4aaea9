"""truepeak: what a GPU really does, how close a workload comes to it, and what holds an MoE model back at decode.

The core (``truepeak.formats``, ``truepeak.hardware``, ``truepeak.roofline``) is pure Python and imports without torch.
Measuring (``truepeak.bench``) imports torch, triton and NVML lazily, only when it runs.
"""

__version__ = "0.1.0"

#: Version of the JSON Lines record layout (``truepeak.records``; docs/records.md); bump when a field changes meaning
#: or is removed. 3: typed records, the unit in every derived metric's name (``dense_fraction``, not ``pct_dense``;
#: ``busbw_bytes_per_s``), kind ``peak_search``; version 2 files are migrated on reading. 2: ``derived`` in SI
#: (``flop_per_s``, ``bytes_per_s``; 1 had TFLOPS and GB/s), ``rotation``, and the method in ``run_config``.
SCHEMA_VERSION = 3
#: Version of the measurement method; bump when timing, warm-up, rotation or statistics change.
METHODOLOGY_VERSION = 1
