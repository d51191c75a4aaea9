"""The torch GEMM backend: one case allocated and ready to launch (:class:`TorchGemm`: ``gemm(i)`` runs the product on
input set ``i % n_sets``), checked against a float64 reference, with the library's own refusals turned into
:class:`~truepeak.bench.gemm.support.BackendUnsupported`."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from truepeak.bench.gemm.operands import WeightCache, make_operand, stable_seed, torch_module
from truepeak.bench.gemm.support import (INPUT_KINDS, TOLERANCES, BackendUnsupported, fp8_scaling, padding_note,
                                         run_rows)
from truepeak.errors import UnsupportedError
from truepeak.formats import Format, get_format


#: The library answers that say "this combination is not supported" (vs a bug or an out-of-memory).
_UNSUPPORTED_WORDS = ("not supported", "not_supported", "only supported", "unsupported", "invalid scaling",
                      "expected", "is not implemented", "no kernel", "requires")


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Set ``torch.backends.cuda.matmul.allow_tf32`` (and cuDNN's) for the block; restore the old values after."""
    torch = torch_module()
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@dataclass
class TorchGemm:
    """One GEMM case, allocated and ready to launch: ``gemm(i)`` runs the product on input set ``i % n_sets``.

    Args:
        fmt: format name or Format (one of :data:`GPU_FORMATS`, :data:`GPU_SKIP_PROBES` / :data:`CPU_FORMATS`).
        m, n, k: shape; A is M x K, the weight B is N x K, C is M x N.
        device: torch device string (``"cuda:0"``, ``"cpu"``).
        n_sets: rotation sets (>= 1); each has its own A, B and C.
        weights: a :class:`WeightCache` to share B across cases with the same (format, N, K); None draws fresh ones.
        scaling: fp8 scale layout (``"tensor"`` default, ``"row"``, ``"block128"``); None for other formats.
        inputs: ``"random"`` (default) or ``"zeros"`` (docs/method.md, 'Random inputs': only when asked; pass it on to
            the timer as ``input_kind`` so the measurement is labelled).

    Memory: ``n_sets * bytes_per_set(fmt, m, n, k)`` bytes on the device (torch may raise OutOfMemoryError).
    Call :meth:`close` (or let it go out of scope) to free it.
    """

    fmt: Format
    m: int
    n: int
    k: int
    device: str
    n_sets: int
    weights: WeightCache | None = None
    scaling: str | None = None
    inputs: str = "random"

    def __post_init__(self) -> None:
        torch = torch_module()
        self.fmt = get_format(self.fmt)
        self.scaling = fp8_scaling(self.fmt, self.scaling)
        if self.inputs not in INPUT_KINDS:
            raise UnsupportedError(f"unknown inputs {self.inputs!r}; accepted: {', '.join(INPUT_KINDS)}")
        self.n_sets = max(1, int(self.n_sets))
        f, m, n, k = self.fmt, self.m, self.n, self.k
        self._torch = torch
        if self.weights is not None:
            self._b = self.weights.get(f, n, k, self.n_sets, self.device, self.scaling, self.inputs)
        else:
            self._b = [make_operand(f, n, k, self.device, stable_seed("B", n, k, j), scaling=self.scaling, weight=True,
                                    inputs=self.inputs) for j in range(self.n_sets)]
        rows = run_rows(f, m, self.scaling)
        self._a = [make_operand(f, rows, k, self.device, stable_seed("A", rows, k, j), scaling=self.scaling,
                                inputs=self.inputs) for j in range(self.n_sets)]
        self.a = [op.data for op in self._a]
        self.b = [op.data for op in self._b]
        self.bt = [b.t() for b in self.b]  # (K, N) column-major views: the TN layout
        self.c: list = []
        self._called = False
        if f.name in ("fp32", "tf32", "bf16", "fp16"):
            out_dtype = getattr(torch, get_format(f.output).torch_dtype)
            self.c = [torch.empty((m, n), device=self.device, dtype=out_dtype) for _ in range(self.n_sets)]
        self._launch = self._make_launch()

    @property
    def note(self) -> str:
        """What the record must say about how this GEMM ran (M padded for 128-block scales, :func:`padding_note`), or
        an empty string."""
        return padding_note(self.fmt, self.m, self.scaling)

    @property
    def input_kind(self) -> str:
        """What the inputs are, for :func:`~truepeak.bench.cuda_timer.time_cuda`'s ``input_kind``."""
        return self.inputs

    @property
    def tolerance(self) -> float:
        return TOLERANCES[self.fmt.name]

    def mode(self):
        """Context manager the launches and the check must run under (TF32 on for tf32, off for everything else)."""
        return tf32_mode(self.fmt.name == "tf32")

    def _make_launch(self) -> Callable[[int], Any]:
        torch, name = self._torch, self.fmt.name
        a, bt, A, B = self.a, self.bt, self._a, self._b
        if name == "int8":
            return lambda j: torch._int_mm(a[j], bt[j])
        if name in ("fp32", "tf32", "bf16", "fp16"):
            c = self.c
            return lambda j: torch.mm(a[j], bt[j], out=c[j])
        bf16 = torch.bfloat16
        if self.scaling == "block128":
            F = torch.nn.functional
            ra, rb = F.ScalingType.BlockWise1x128, F.ScalingType.BlockWise128x128
            return lambda j: F.scaled_mm(a[j], bt[j], A[j].scale, ra, B[j].scale, rb, output_dtype=bf16)
        return lambda j: torch._scaled_mm(a[j], bt[j], A[j].scale, B[j].scale, out_dtype=bf16)

    def __call__(self, i: int = 0):
        """Launch the GEMM on set ``i % n_sets``; returns the output tensor (asynchronous on a GPU)."""
        return self._launch(i % self.n_sets)

    def _first_call(self):
        """The first launch: a library refusal of this combination becomes :class:`BackendUnsupported`."""
        try:
            with self.mode():
                return self(0)
        except (RuntimeError, ValueError, NotImplementedError, TypeError) as exc:
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            if "out of memory" in text.lower() or self.fmt.name in ("fp32", "tf32", "bf16", "fp16", "int8") or (
                    self.fmt.name == "fp8_e4m3" and self.scaling == "tensor"):
                raise
            if not any(w in text.lower() for w in _UNSUPPORTED_WORDS) and "CUBLAS_STATUS" not in text:
                raise
            torch = self._torch
            arch = ""
            with contextlib.suppress(Exception):
                if str(self.device).startswith("cuda"):
                    major, minor = torch.cuda.get_device_capability(self.device)
                    arch = f" on sm_{major}{minor}"
            what = self.fmt.name + (f" ({self.scaling} scales)" if self.scaling else "")
            raise BackendUnsupported(f"{what} GEMM rejected by torch {torch.__version__}{arch}: {first[:240]}") \
                from None

    def check(self, rows: int | None = None) -> float:
        """Relative error ``||out - ref||_F / ||ref||_F`` of set 0 against a float64 reference on the first ``rows`` rows.

        The reference uses the same quantised inputs with their scales applied (upcast to float64), so the error
        measures the kernel's arithmetic and output rounding only. Returns ``nan`` if the output holds a NaN or Inf,
        0.0 for an exact match (int8 must be exact). Poisons the output buffer first, so an unwritten output cannot
        pass.

        Raises:
            BackendUnsupported: the library refused this format / scaling at its first call (a ``skipped`` case).
        """
        torch = self._torch
        r = self.m if rows is None else max(1, min(int(rows), self.m))
        if self.c:
            self.c[0].fill_(float("nan"))
        out = self._first_call() if not self._called else None
        self._called = True
        if out is None:
            with self.mode():
                out = self(0)
        a = self._a[0].dequant(r)
        b = self._b[0].dequant(None)
        ref = a @ b.t()
        got = out[:r].to(torch.float64) * (self._a[0].factor * self._b[0].factor)
        if not bool(torch.isfinite(got).all()):
            return math.nan
        ref_norm = float(torch.linalg.vector_norm(ref))
        diff = float(torch.linalg.vector_norm(got - ref))
        if ref_norm == 0.0:
            return 0.0 if diff == 0.0 else math.inf
        return diff / ref_norm

    def close(self) -> None:
        self.a = self.b = self.bt = self.c = []
        self._a = self._b = []


__all__ = ["tf32_mode", "TorchGemm"]
