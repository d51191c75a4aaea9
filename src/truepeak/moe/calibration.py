"""What a GPU achieves at decode shapes, measured: the calibration the planner's expected step is built from.

Pure Python (json only). A calibration file holds what ``benchmarks/calibration_points.py``, the routed-expert sweep
and ``truepeak comm`` measured on one GPU; ``benchmarks/build_calibration.py`` turns the committed H200 measurements
(docs/results/h200/calibration/, docs/results/h200/moe/, docs/results/h200x2/bound/) into the shipped default,
``truepeak/moe/calibrations/h200.json``. Nothing in it is fitted to a serving measurement.

What it gives (:class:`Calibration`; every lookup interpolates linearly in log x between measured points and holds
the end value outside them, unless said otherwise):

- the cost of one tiny kernel inside a CUDA graph and launched eagerly (:attr:`Calibration.kernel_graph_s`,
  :attr:`~Calibration.kernel_eager_s`; H200: 1.15 µs and 11.4 µs);
- one elementwise kernel by bytes moved (:meth:`~Calibration.elementwise_s`: the measured add, 1.16 µs at 12 KB to
  2.33 µs at 11 MB), and argmax over the vocabulary by rows (:meth:`~Calibration.argmax_s`);
- the fraction of the read bandwidth a dense GEMM reaches by format, M and weight size
  (:meth:`~Calibration.gemm_fraction`), a routed-expert layer by format, kernel, tokens per expert and local experts
  (:meth:`~Calibration.expert_fraction`), decode attention by bytes read (:meth:`~Calibration.attention_fraction`),
  and the best compute fraction of the measured GEMMs (:meth:`~Calibration.compute_fraction`);
- the time of one collective by size on the measured ranks, in a graph and eagerly (:meth:`~Calibration.collective_s`).

Carry-over to a GPU that was never measured (:func:`carry_over`, stated in every plan as an assumption): fractions of
the read bandwidth carry over by format, applied to the GPU's catalog bandwidth times the measured GPU's
read / catalog ratio (H200: 4.485 / 4.8 TB/s = 0.934); fixed costs (kernel, small ops, collective latency) carry over
in seconds; the size term of a collective scales with the catalog's NVLink bandwidth per GPU; a weight format the
target GPU computes natively but the measured GPU dequantised (nvfp4 / mxfp4 on Blackwell, measured on Hopper) takes
the measured fp8 fraction of the same kernel (a native tensor-core path of the same kernel structure).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from truepeak.errors import ConfigError

#: The calibration file format this module reads.
CALIBRATION_VERSION = 1
#: The shipped calibration (package data) and the catalog key of the GPU it was measured on.
DEFAULT_CALIBRATION = "h200.json"
#: Expert kernels a calibration may hold: the stock library grouped GEMMs, truepeak's Triton kernel.
EXPERT_KERNELS = ("library", "truepeak_triton")


def interp_log(xs, ys, x: float) -> float:
    """y at ``x`` by linear interpolation in log x between sorted points (``xs`` > 0), held at the end values
    outside them. ``interp_log([1, 4], [0.5, 0.7], 2)`` = 0.5 + 0.2 · log(2)/log(4) = 0.6."""
    if not xs:
        raise ConfigError("no points to interpolate between", field="calibration")
    if x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        return float(ys[-1])
    lx = math.log(x)
    for i in range(1, len(xs)):
        if x <= xs[i]:
            x0, x1 = math.log(xs[i - 1]), math.log(xs[i])
            w = (lx - x0) / (x1 - x0) if x1 > x0 else 0.0
            return float(ys[i - 1] + w * (ys[i] - ys[i - 1]))
    return float(ys[-1])


def _pairs(raw, where: str) -> tuple[tuple[float, float], ...]:
    try:
        out = tuple(sorted((float(a), float(b)) for a, b, *_ in raw))
    except (TypeError, ValueError):
        raise ConfigError(f"calibration {where}: expected a list of [x, y] pairs", field=where) from None
    if not out or any(a <= 0 or b <= 0 for a, b in out):
        raise ConfigError(f"calibration {where}: every point needs x > 0 and y > 0", field=where)
    return out


@dataclass(frozen=True)
class Calibration:
    """One GPU's measured decode-shape costs (module docstring). Seconds, bytes, fractions of the read bandwidth.

    Attributes:
        device: the measured GPU's name; catalog_key: its catalog key (``"h200-sxm"``), or ``""``.
        source: where it was read from (a path, or ``"shipped: h200.json"``).
        read_bandwidth: the read bandwidth measured with it, B/s (the denominator of every fraction).
        kernel_graph_s, kernel_eager_s: one tiny kernel in a CUDA graph / launched eagerly, s.
        elementwise: (bytes, s) of one elementwise kernel; argmax: (rows, s) over ``argmax_cols`` values.
        gemm: format key (``"bf16"``, ``"fp8_e4m3:tensor"``, ``"fp8_e4m3:block128"``) → tuple of
            (weight values N·K, ((M, fraction), ...)).
        compute: format key → the best measured FLOP / (s × dense peak) of its GEMMs.
        attention: (bytes, fraction) of decode attention.
        experts: kernel → format → local experts → ((tokens per expert, fraction), ...).
        collectives: mode (``"graph"``, ``"eager"``) → op → ((bytes, s), ...), on ``collective_ranks`` ranks.
    """

    device: str
    catalog_key: str
    source: str
    read_bandwidth: float
    kernel_graph_s: float
    kernel_eager_s: float
    elementwise: tuple
    argmax: tuple
    argmax_cols: int
    gemm: dict
    compute: dict
    attention: tuple
    experts: dict
    collectives: dict
    collective_ranks: int = 2
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    # -- lookups ------------------------------------------------------------------------------------------------------
    def kernel_s(self, eager: bool) -> float:
        """One tiny kernel's cost: eagerly launched or inside a CUDA graph."""
        return self.kernel_eager_s if eager else self.kernel_graph_s

    def elementwise_s(self, nbytes: float) -> float:
        """Seconds of one elementwise kernel moving ``nbytes`` (the measured add); above the largest point, the
        largest point's bandwidth carries the extra bytes."""
        xs = [b for b, _ in self.elementwise]
        ys = [s for _, s in self.elementwise]
        if nbytes > xs[-1]:
            return ys[-1] * nbytes / xs[-1]
        return interp_log(xs, ys, max(nbytes, 1.0))

    def argmax_s(self, rows: float, cols: int) -> float:
        """Seconds of argmax over ``rows`` × ``cols`` logits: the measured rows curve at :attr:`argmax_cols`, scaled
        by ``cols / argmax_cols`` when wider."""
        t = interp_log([r for r, _ in self.argmax], [s for _, s in self.argmax], max(rows, 1.0))
        return t * max(1.0, cols / self.argmax_cols)

    def gemm_key(self, fmt: str, scaling: str | None) -> str:
        """The measured GEMM table for weight format ``fmt``: bf16 / fp16 → bf16; fp8 / int8 → fp8 with its
        scaling (block128, else per-tensor); 4-bit formats → fp8 per-tensor (no dense fp4 GEMM was measured)."""
        if fmt in ("bf16", "fp16"):
            return "bf16"
        if scaling == "block128" and "fp8_e4m3:block128" in self.gemm:
            return "fp8_e4m3:block128"
        return "fp8_e4m3:tensor" if "fp8_e4m3:tensor" in self.gemm else "bf16"

    def gemm_fraction(self, key: str, m: float, n: int, k: int) -> float:
        """Fraction of the read bandwidth of a dense GEMM [M × K]·[K × N] in table ``key``: at each measured weight
        shape the M curve at ``m``, then between shapes by weight values N·K."""
        shapes = self.gemm[key]
        xs = [w for w, _ in shapes]
        ys = [interp_log([p[0] for p in pts], [p[1] for p in pts], max(m, 1.0)) for _, pts in shapes]
        return interp_log(xs, ys, float(n) * k)

    def compute_fraction(self, key: str) -> float:
        """The best measured FLOP / (s × dense peak) of the GEMMs of table ``key``."""
        return self.compute.get(key, max(self.compute.values()))

    def attention_fraction(self, nbytes: float) -> float:
        """Fraction of the read bandwidth of decode attention reading ``nbytes`` of KV cache."""
        return interp_log([b for b, _ in self.attention], [f for _, f in self.attention], max(nbytes, 1.0))

    def expert_table(self, kernel: str, fmt: str) -> tuple[str, str] | None:
        """(kernel, format) of the measured expert table used for ``kernel`` and ``fmt``: that kernel's, else
        truepeak's Triton kernel's (the only one measured for fp4 on Hopper), else None."""
        for kk in (kernel, "truepeak_triton"):
            if fmt in self.experts.get(kk, {}):
                return kk, fmt
        return None

    def expert_fraction(self, kernel: str, fmt: str, tokens_per_expert: float, local_experts: int) -> float:
        """Fraction of the read bandwidth of one routed-expert layer: the table of :meth:`expert_table`, between the
        measured local-expert counts by log E, at ``tokens_per_expert``; above the largest measured tokens per
        expert the time grows with the tokens (fraction × largest / tokens: compute-bound there).

        Raises:
            ConfigError: no expert table for ``fmt`` (nor a fallback).
        """
        hit = self.expert_table(kernel, fmt)
        if hit is None:
            raise ConfigError(f"calibration {self.source} has no routed-expert fractions for {fmt}", field="experts")
        by_e = self.experts[hit[0]][hit[1]]
        es = sorted(by_e)
        fr = []
        for e in es:
            pts = by_e[e]
            top = pts[-1][0]
            f = interp_log([p[0] for p in pts], [p[1] for p in pts], max(tokens_per_expert, pts[0][0]))
            fr.append(f * top / tokens_per_expert if tokens_per_expert > top else f)
        return interp_log(es, fr, max(local_experts, 1))

    def collective_s(self, op: str, nbytes: float, eager: bool) -> float | None:
        """Seconds of one ``op`` call of nccl-tests size ``nbytes`` on :attr:`collective_ranks` ranks (graph or
        eager); above the largest point its bandwidth carries the extra bytes; None when ``op`` was not measured."""
        pts = self.collectives.get("eager" if eager else "graph", {}).get(op)
        if not pts:
            return None
        xs, ys = [b for b, _ in pts], [s for _, s in pts]
        if nbytes > xs[-1]:
            return ys[-1] * nbytes / xs[-1]
        return interp_log(xs, ys, max(nbytes, 1.0))


def _parse(doc: dict, source: str) -> Calibration:
    if not isinstance(doc, dict) or doc.get("calibration_version") != CALIBRATION_VERSION:
        raise ConfigError(f"{source} is not a truepeak calibration (calibration_version {CALIBRATION_VERSION}); "
                          "build one with benchmarks/build_calibration.py", field="calibration")
    try:
        dev = doc["device"]
        gemm = {key: tuple(sorted((float(s["n"]) * float(s["k"]), _pairs(s["points"], f"gemm.{key}"))
                                  for s in shapes)) for key, shapes in doc["gemm"].items()}
        experts = {kern: {fmt: {int(e): _pairs(pts, f"experts.{kern}.{fmt}.{e}") for e, pts in by_e.items()}
                          for fmt, by_e in by_fmt.items()} for kern, by_fmt in doc["experts"].items()}
        coll = doc["collectives"]
        colls = {mode: {op: _pairs(pts, f"collectives.{mode}.{op}") for op, pts in coll.get(mode, {}).items()}
                 for mode in ("graph", "eager")}
        argmax = doc["argmax"]
        cal = Calibration(
            device=str(dev["name"]), catalog_key=str(dev.get("catalog_key") or ""), source=source,
            read_bandwidth=float(doc["read_bandwidth_B_per_s"]),
            kernel_graph_s=float(doc["kernel_s"]["graph"]), kernel_eager_s=float(doc["kernel_s"]["eager"]),
            elementwise=_pairs(doc["elementwise"], "elementwise"),
            argmax=_pairs([[r, s] for r, _c, s in argmax], "argmax"), argmax_cols=int(argmax[0][1]),
            gemm=gemm, compute={k: float(v) for k, v in doc["gemm_compute_fraction"].items()},
            attention=_pairs(doc["attention"], "attention"), experts=experts, collectives=colls,
            collective_ranks=int(coll.get("ranks", 2)), raw=doc)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: calibration field missing or malformed ({exc!s}); build one with "
                          "benchmarks/build_calibration.py", field="calibration") from None
    if cal.read_bandwidth <= 0 or cal.kernel_graph_s <= 0 or cal.kernel_eager_s <= 0:
        raise ConfigError(f"{source}: read bandwidth and kernel costs must be > 0", field="calibration")
    return cal


def load_calibration(path) -> Calibration:
    """Read a calibration JSON file (``--calibration FILE``).

    Raises:
        ConfigError: the file cannot be read, is not JSON, or is not a calibration of this version.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except OSError as exc:
        raise ConfigError(f"--calibration {path}: cannot read it ({exc.strerror or exc})", field="calibration") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--calibration {path}: not JSON ({exc.msg} at line {exc.lineno})",
                          field="calibration") from None
    return _parse(doc, str(path))


_SHIPPED: dict[str, Calibration] = {}


def default_calibration() -> Calibration:
    """The shipped calibration (:data:`DEFAULT_CALIBRATION`, an NVIDIA H200 SXM), read once."""
    if DEFAULT_CALIBRATION not in _SHIPPED:
        text = resources.files("truepeak.moe").joinpath("calibrations", DEFAULT_CALIBRATION).read_text()
        _SHIPPED[DEFAULT_CALIBRATION] = _parse(json.loads(text), f"shipped: {DEFAULT_CALIBRATION}")
    return _SHIPPED[DEFAULT_CALIBRATION]


_LINK = re.compile(r"(\d+(?:\.\d+)?)\s*(GB/s|TB/s)(\s*per direction)?", re.I)
#: The NVLink bandwidth the literature NVLink defaults of :mod:`truepeak.comm.model` were measured on (H100 SXM,
#: NVLink4: 900 GB/s bidirectional).
DEFAULTS_LINK = 900e9


def link_bandwidth(acc) -> float | None:
    """The bidirectional bandwidth per GPU of the first figure the catalog's interconnect text names for ``acc``
    (NVLink4 900 GB/s, NVLink5 1.8 TB/s, XGMI 448 GB/s per direction = 896 GB/s), B/s; None when it names none."""
    text = acc.interconnect.value if acc.interconnect is not None else ""
    m = _LINK.search(str(text or ""))
    if not m:
        return None
    both = 2.0 if m.group(3) else 1.0
    return both * float(m.group(1)) * (1e12 if m.group(2).lower() == "tb/s" else 1e9)


@dataclass(frozen=True)
class CarryOver:
    """How a calibration applies to ``accelerator`` (:func:`carry_over`).

    Attributes:
        accelerator: the planned GPU's name; calibration: the measured GPU's name.
        same_device: the calibration was measured on this GPU (catalog key equal).
        bandwidth: the read bandwidth the fractions apply to, B/s (measured, or catalog × the measured ratio).
        ratio: the measured GPU's read / catalog bandwidth.
        link_ratio: the size-term scale of collectives (measured GPU's NVLink bandwidth / this GPU's), 1 when equal
            or unknown.
        native_fp4: formats this GPU computes natively that the measured GPU did not (fp8 fractions used).
    """

    accelerator: str
    calibration: str
    same_device: bool
    bandwidth: float
    ratio: float
    link_ratio: float = 1.0
    native_fp4: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"accelerator": self.accelerator, "calibration": self.calibration, "same_device": self.same_device,
                "bandwidth_B_per_s": self.bandwidth, "read_to_catalog_ratio": self.ratio,
                "link_ratio": self.link_ratio, "native_formats_from_fp8": list(self.native_fp4)}


def carry_over(cal: Calibration, acc) -> CarryOver:
    """The carry-over rule of the module docstring for ``acc`` (a catalog accelerator)."""
    from truepeak.hardware.lookup import get_accelerator

    try:
        measured = get_accelerator(cal.catalog_key) if cal.catalog_key else None
    except Exception:
        measured = None
    ref_bw = measured.bandwidth_bytes_per_s if measured is not None else None
    ratio = cal.read_bandwidth / ref_bw if ref_bw else 1.0
    same = measured is not None and measured.key == acc.key
    bw = cal.read_bandwidth if same else acc.bandwidth_bytes_per_s * ratio
    link = 1.0
    if not same and measured is not None:
        a, b = link_bandwidth(measured), link_bandwidth(acc)
        if a and b:
            link = a / b
    native = ()
    if not same and measured is not None:
        native = tuple(f for f in ("nvfp4", "mxfp4") if acc.has_rate(f) and not measured.has_rate(f))
    return CarryOver(acc.name, cal.device, same, bw, ratio, link, native)


__all__ = ["CALIBRATION_VERSION", "DEFAULT_CALIBRATION", "EXPERT_KERNELS", "Calibration", "CarryOver", "interp_log",
           "load_calibration", "default_calibration", "carry_over", "link_bandwidth"]
