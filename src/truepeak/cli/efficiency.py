"""`truepeak efficiency`: a measured GEMM against the DENSE peak and the roofline (case S1), without writing code.

Thin adapter: parse options → :func:`truepeak.efficiency.analyze` → render. Bad input becomes ``error: <one line>`` on
stderr and exit status 2.
"""

from __future__ import annotations

import json
import math
from typing import Optional

import typer

from truepeak.cli.app import app, fail
from truepeak.errors import TruepeakError, UnknownNameError, closest

HELP = "\n\n".join([
    "Efficiency of a measured GEMM against the DENSE peak, and where its shape sits on the roofline.",
    "Give the measured throughput (--tflops), or the time per GEMM (--time-ms) with its shape (--shape MxNxK); "
    "any two of throughput, shape and time give the third. --shape alone prints the FLOP, bytes, intensity, ridge, "
    "roofline ceiling, bound and time floor of that shape.",
    "Example (case S1, NVFP4 on an RTX PRO 6000 Blackwell Workstation Edition):",
    "  truepeak efficiency --gpu \"rtx pro 6000\" --format nvfp4 --tflops 1300",
    "  → 64.5 % of the 2015.2 TFLOPS dense peak (not 32.3 % of the 4030.4 TFLOPS sparse \"4 PFLOPS\" headline)",
    "  truepeak efficiency --gpu \"rtx pro 6000\" --format nvfp4 --shape 16x6144x4096 --tflops 0.8",
    "  → memory-bound (56 FLOP/B against a 1125 FLOP/B ridge): roofline ceiling 100.3 TFLOPS; the percentage that "
    "matters is of memory bandwidth.",
    "  truepeak efficiency --gpu \"rtx pro 6000\" --format nvfp4 --shape 16x6144x4096",
    "  → the same bounds without a measurement.",
    "Units: TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal). FLOP = 2·M·N·K; bytes = A (M×K) + weight B (N×K) + "
    "C (M×N), each in its format with block scales.",
])


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("-", " ").replace("_", " ").split())


def resolve_gpu(name: str):
    """The catalog Accelerator for ``name``: :func:`truepeak.hardware.get_accelerator` when it exists, else an exact
    (case-, dash- and space-insensitive) match on key, name, device name or alias. Raises UnknownNameError."""
    try:
        from truepeak.hardware import get_accelerator  # added in parallel; absent in early trees
    except ImportError:
        get_accelerator = None
    if get_accelerator is not None:
        return get_accelerator(name)
    from truepeak.hardware.catalog import load_catalog

    want = _norm(name)
    names: list[str] = []
    for acc in load_catalog().accelerators:
        spellings = (acc.key, acc.name, *acc.device_names, *acc.aliases)
        names.extend(spellings)
        if want in {_norm(s) for s in spellings}:
            return acc
    near = closest(name, names)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise UnknownNameError(f"unknown GPU {name!r}{hint}; see `truepeak specs` for the catalog")


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} µs"


def _bytes(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.4g} GB"
    if n >= 1e6:
        return f"{n / 1e6:.4g} MB"
    if n >= 1e3:
        return f"{n / 1e3:.4g} kB"
    return f"{n:.0f} B"


def render(eff) -> list[str]:
    """The lines ``truepeak efficiency`` prints for an :class:`~truepeak.efficiency.Efficiency`."""
    from truepeak.efficiency import percent
    from truepeak.roofline import rate_text as r

    u = eff.unit
    acc_note = "" if eff.accumulate in ("fp32", "int32") else f", {eff.accumulate} accumulate"
    lines = [f"{eff.accelerator} · {eff.format} ({eff.rate} rate{acc_note})"]
    row = "  {:<22}{}".format
    src = f"  [{'derived; ' if eff.peak_derived else ''}{eff.peak_source}]"
    lines.append(row("dense peak", f"{r(eff.dense_flops)} {u}{src}"))
    if eff.peak_note:
        lines.append(row("peak note", eff.peak_note))
    if eff.achieved_flops is not None:
        lines.append(row("achieved", f"{r(eff.achieved_flops)} {u} = {percent(eff.pct_dense)} of the dense peak"))
    else:
        lines.append(row("achieved", "not given: bounds of the shape only (add --tflops or --time-ms for efficiency)"))
    if eff.sparse_trap:
        lines.append(row("sparse headline", eff.sparse_trap))
    if eff.peak_at_clock_flops is not None:
        pct = f"{percent(eff.pct_at_clock)} of " if eff.pct_at_clock is not None else ""
        lines.append(row("at measured clock", f"{pct}{r(eff.peak_at_clock_flops)} {u} "
                                              f"(dense peak at {eff.clock_hz / 1e6:.0f} MHz)"))
    if eff.gemm is not None:
        g = eff.gemm
        lines.append(f"shape {g.label} (M x N x K), {g.format.name} in, {g.out_format.name} out"
                     + (f", {g.scaling} fp32 scales" if g.scaling else ""))
        lines.append(row("FLOP", f"{eff.flop:.5g} (2·M·N·K)"))
        lines.append(row("min bytes", f"{_bytes(eff.min_bytes)} = A {_bytes(eff.a_bytes)} + weight B "
                                      f"{_bytes(eff.b_bytes)} + C {_bytes(eff.c_bytes)}"))
        floor = f"floor {_time(eff.time_floor_s)}" if eff.time_floor_s is not None else ""
        if eff.time_s is not None:
            lines.append(row("time", f"{_time(eff.time_s)} per GEMM" + (f"; {floor}" if floor else "")))
        elif floor:
            lines.append(row("time", f"{floor} per GEMM (max of FLOP / dense peak, bytes / bandwidth)"))
        if eff.ridge is not None:
            lines.append(row("intensity", f"{eff.intensity:.4g} FLOP/B; ridge {eff.ridge:.4g} FLOP/B "
                                          f"→ {eff.bound}-bound"))
            how = (f"{eff.bandwidth / 1e12:.4g} TB/s × {eff.intensity:.4g} FLOP/B" if eff.bound == "memory"
                   else "the dense peak")
            ach = f"; achieved {percent(eff.pct_roofline)} of it" if eff.pct_roofline is not None else ""
            lines.append(row("roofline ceiling", f"{r(eff.attainable_flops)} {u} ({how}){ach}"))
            if eff.pct_bandwidth is not None:
                lines.append(row("memory bandwidth", f"{eff.achieved_bandwidth / 1e9:.4g} GB/s = "
                                                     f"{percent(eff.pct_bandwidth)} of {eff.bandwidth / 1e9:.0f} GB/s "
                                                     "— the percentage that matters for a memory-bound shape"))
            elif eff.bound == "memory" and eff.achieved_flops is None:
                lines.append(row("memory bandwidth", f"{eff.bandwidth / 1e9:.0f} GB/s — for a memory-bound shape the "
                                                     "percentage that matters is of memory bandwidth"))
        else:
            lines.append(row("intensity", f"{eff.intensity:.4g} FLOP/B"))
    for note in eff.notes:
        lines.append(f"note: {note}")
    lines.append(f"{u} = 1e12 {'integer ops' if u == 'TOPS' else 'FLOP'}/s, GB/s = 1e9 B/s (decimal); "
                 "efficiency is against the DENSE peak.")
    return lines


@app.command("efficiency", help=HELP)
def efficiency(
    gpu: str = typer.Option(..., "--gpu", "-g", help="GPU: marketing name, device string or alias (e.g. h200, 'rtx pro 6000')."),
    format: str = typer.Option(..., "--format", "-f", help="Input format: fp32, tf32, bf16, fp16, fp8_e4m3, fp8_e5m2, mxfp8, mxfp6, mxfp4, nvfp4, int8 (aliases accepted: fp8 = fp8_e4m3, fp4 = nvfp4, bfloat16 = bf16)."),
    tflops: Optional[float] = typer.Option(None, "--tflops", help="Measured throughput, TFLOPS (1e12 FLOP/s; TOPS for int8)."),
    shape: Optional[str] = typer.Option(None, "--shape", help="GEMM shape MxNxK (e.g. 16x6144x4096; weight is N x K). Alone: the roofline bounds of the shape."),
    time_ms: Optional[float] = typer.Option(None, "--time-ms", help="Measured time per GEMM, milliseconds (needs --shape)."),
    accumulate: Optional[str] = typer.Option(None, "--accumulate", help="Accumulator of the peak: fp32 (default) or fp16 (GeForce fast path)."),
    scaling: Optional[str] = typer.Option(None, "--scaling", help="fp8/int8 scale layout for the byte count: tensor, row, block128."),
    clock_mhz: Optional[float] = typer.Option(None, "--clock-mhz", help="Measured SM clock, MHz: adds % of the peak at that clock (GPUs often run above the spec clock)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (SI units, fractions)."),
) -> None:
    try:
        from truepeak.efficiency import analyze
        from truepeak.errors import MeasurementError
        from truepeak.formats import alias_note, check_scaling, get_format
        from truepeak.roofline import check_clock

        fmt = get_format(format)
        read_as = alias_note(format)
        acc = resolve_gpu(gpu)
        if accumulate is not None and accumulate.lower() not in ("fp32", "fp16", "int32"):
            raise UnknownNameError(f"unknown accumulator {accumulate!r}; accepted: fp32, fp16 (int32 for int8)")
        scaling = check_scaling(fmt, None if scaling is None else scaling.strip().lower(), flag="--scaling")
        if tflops is None and time_ms is None and shape is None:
            raise TruepeakError("give the measured throughput (--tflops), or the time per GEMM (--time-ms) with its "
                                "--shape MxNxK, or --shape alone for the roofline bounds of that shape")
        if time_ms is not None and shape is None:
            raise TruepeakError("--time-ms needs --shape MxNxK (e.g. 16x6144x4096) to count the FLOP; "
                                "or give the throughput alone with --tflops")
        if time_ms is not None and (not math.isfinite(time_ms) or time_ms <= 0):
            raise MeasurementError(f"--time-ms {time_ms:g} is not a positive time; a measured GEMM takes > 0 ms")
        if tflops is not None and (not math.isfinite(tflops) or tflops <= 0):
            raise MeasurementError(f"--tflops {tflops:g}: throughput {tflops:g} is not a positive finite number; "
                                   "a measurement must be > 0")
        clock_hz = None if clock_mhz is None else check_clock(acc, clock_mhz * 1e6, "--clock-mhz")
        eff = analyze(
            acc, fmt, tflops=tflops, shape=shape, time_s=None if time_ms is None else time_ms * 1e-3,
            accumulate=None if accumulate is None else accumulate.lower(), scaling=scaling, clock_hz=clock_hz,
        )
    except TruepeakError as exc:
        raise fail(str(exc), exc.exit_code) from None
    if as_json:
        typer.echo(json.dumps(eff.to_dict(), indent=2))
    else:
        lines = render(eff)
        if read_as:
            lines.insert(1, f"  format read as: {read_as}")
        for line in lines:
            typer.echo(line)
