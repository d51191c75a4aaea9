"""The read-only bandwidth of this GPU, measured in the run that uses it: the ceiling every weight-streaming kernel
(``moe bench``'s experts, the calibration points) is judged against.

Method: a Triton reduction (:func:`truepeak.kernels._moe_jit.read_sum_kernel`) sums a float32 buffer of ``nbytes``
(4 GiB by default, far beyond the H200's 60 MB L2, so every byte comes from HBM) into one partial per program, replayed
from a CUDA graph (:func:`truepeak.bench.cuda_timer.time_cuda`); bytes read / median time, the best of three launch
shapes (block, programs per SM, warps).
"""

from __future__ import annotations

from truepeak.errors import UnsupportedError, require


def measure_read_bandwidth(nbytes: int = 4 << 30, budget_s: float = 0.5) -> float:
    """The read-only ceiling of this run in bytes/s: a Triton reduction over ``nbytes`` (≥ 4 GiB by default),
    CUDA-graph timed for ``budget_s`` seconds split over three launch shapes; the best shape's median. On an H200:
    4.485 TB/s (docs/results/h200/moe/README.md).

    Raises:
        MissingDependencyError: torch (or triton) is not installed. UnsupportedError: torch sees no CUDA GPU.
    """
    torch = require("torch", "measuring read bandwidth")
    if not torch.cuda.is_available():
        raise UnsupportedError("measuring the read bandwidth needs a CUDA GPU (torch sees none)")
    from truepeak.bench.cuda_timer import time_cuda
    from truepeak.kernels._moe_jit import read_sum_kernel

    n = nbytes // 4
    # A private generator: the default CUDA generator is unusable after an aborted graph capture elsewhere.
    buf = torch.rand(n, device="cuda", dtype=torch.float32, generator=torch.Generator(device="cuda").manual_seed(0))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    best = 0.0
    for block, per_sm, warps in ((4096, 8, 8), (8192, 4, 8), (2048, 16, 4)):  # the best of three launch shapes
        programs = sms * per_sm
        per = (n + programs - 1) // programs
        per = (per + block - 1) // block * block
        part = torch.empty(programs, device="cuda", dtype=torch.float32)

        def fn(_i: int, buf=buf, block=block, programs=programs, per=per, part=part, warps=warps) -> None:
            read_sum_kernel[(programs,)](buf, part, n, per, BLOCK=block, num_warps=warps)

        m = time_cuda(fn, n_sets=1, warmup_s=0.2, budget_s=budget_s / 3, graph=True, min_samples=5, telemetry=False)
        best = max(best, n * 4 / m.steady_median_s)
    del buf
    return best
