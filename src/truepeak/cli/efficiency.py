"""`truepeak efficiency`: a measured GEMM against the DENSE peak and the roofline, without writing code (the worked
example of docs/method.md).

Thin adapter: parse options → :func:`truepeak.efficiency.analyze` (which validates everything) → render with
:mod:`truepeak.units`. Bad input becomes ``error: <one line>`` on stderr and exit status 2, with the library's words for
each input replaced by the flag that sets it (:func:`flag_message`).
"""

from __future__ import annotations

import json
import re
from typing import Optional

import typer

from truepeak.cli.app import app, fail
from truepeak.cli.options import help_text
from truepeak.errors import MeasurementError, TruepeakError
from truepeak.formats import default_accumulate
from truepeak.units import fmt_bandwidth, fmt_bytes, fmt_pct, fmt_rate, fmt_time

HELP = help_text([
    "Efficiency of a measured GEMM against the DENSE peak, and where its shape sits on the roofline.",
    "Give the measured throughput (--tflops), or the time per GEMM (--time-ms) with its shape (--shape MxNxK); "
    "any two of throughput, shape and time give the third. --shape alone prints the FLOP, bytes, intensity, ridge, "
    "roofline ceiling, bound and time floor of that shape.",
    "Example (NVFP4 on an RTX PRO 6000 Blackwell Workstation Edition; docs/method.md, "
    "'Worked example: GLM-5 on RTX PRO 6000'):",
    "  truepeak efficiency --gpu \"rtx pro 6000\" --format nvfp4 --tflops 1300",
    "  → 64.5 % of the 2015.2 TFLOPS dense peak (not 32.3 % of the 4030.4 TFLOPS sparse \"4 PFLOPS\" headline)",
    "  truepeak efficiency --gpu \"rtx pro 6000\" --format nvfp4 --shape 16x4096x6144 --tflops 0.8",
    "  → a GLM-5 gate+up GEMM at 16 tokens per expert: memory-bound (56.15 FLOP/B against a 1125 FLOP/B ridge), "
    "roofline ceiling 100.6 TFLOPS; 0.8 TFLOPS is 1.007 ms per GEMM, 0.795 % of the memory bandwidth, the "
    "percentage that matters.",
    "  truepeak efficiency --gpu \"rtx pro 6000\" --format nvfp4 --shape 16x4096x6144",
    "  → the same bounds without a measurement.",
    "Units: TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal). FLOP = 2·M·N·K; bytes = A (M×K) + weight B (N×K) + "
    "C (M×N), each in its format with block scales.",
])


#: How the library names each input of :func:`truepeak.efficiency.analyze` in its messages, the flag that sets it, and
#: the library's rendering of a value of it (``None``: named without a value) -> the value as typed on the flag.
#: ``flag_message`` uses this table to make every error name the flag the user typed, so the CLI validates nothing
#: itself: analyze() is the one place the rules live.
FLAG_WORDS: tuple[tuple[str, str, str | None, object], ...] = (
    ("throughput", "--tflops", r"(\S+) TFLOPS\b", lambda v: f"{float(v):g}"),
    ("time", "--time-ms", r"(\S+) s\b", lambda v: f"{float(v) * 1e3:g}"),  # the library speaks seconds
    ("SM clock", "--clock-mhz", r"(\S+) MHz\b", lambda v: f"{float(v):g}"),
    ("scaling", "--scaling", r"('[^']*')", lambda v: v),
    ("shape", "--shape", r"('[^']*')", lambda v: v),
)


def flag_message(message: str, *, name_bare_words: bool = True) -> str:
    """``message`` from the library with each input named by its flag.

    A word followed by its value (``"time 0.0 s"``, ``"SM clock 5000 MHz"``, ``"scaling 'row'"``) becomes the flag and
    the value as typed (``"--time-ms 0"``, ``"--clock-mhz 5000"``, ``"--scaling 'row'"``). With ``name_bare_words``,
    the first other mention of an input not yet named gets its flag beside it (``"a time (--time-ms) per GEMM"``,
    ``"shape (--shape MxNxK, ...)"``).
    """
    for word, flag, value, typed in FLAG_WORDS:
        if value is not None:
            hit = re.search(rf"\b{word} {value}", message)
            if hit:
                message = message[:hit.start()] + f"{flag} {typed(hit.group(1))}" + message[hit.end():]
                continue
        if not name_bare_words or flag in message:
            continue
        hit = re.search(rf"(?<!block )\b{word}\b( \()?", message)  # "block scaling" is no --scaling
        if hit:
            named = f"{word} ({flag} " if hit.group(1) else f"{word} ({flag})"
            message = message[:hit.start()] + named + message[hit.end():]
    return message


def notes_of(eff) -> list[str]:
    """The notes ``truepeak efficiency`` shows: the analysis's, then what the byte count assumed (a K that is no whole
    number of scale blocks: :meth:`truepeak.formats.Format.block_padding_note`), each once."""
    notes = list(eff.notes)
    g = eff.gemm
    if g is not None:
        padding = g.format.block_padding_note(g.k, g.scaling)
        if padding and padding not in notes:
            notes.append(padding)
    return notes


def to_json(eff) -> dict:
    """The ``--json`` document: :meth:`~truepeak.efficiency.Efficiency.to_dict` (SI values) with every note, and the
    unit of its rate fields stated as SI (``"unit": "FLOP/s"``, ``"ops/s"`` for int8); ``display_unit`` is the unit
    the text output uses (TFLOPS = 1e12 FLOP/s, TOPS)."""
    d = eff.to_dict()
    d["notes"] = notes_of(eff)
    d["display_unit"] = eff.unit
    d["unit"] = "ops/s" if eff.unit == "TOPS" else "FLOP/s"
    return d


def alias_gpu_note(acc, typed: str) -> str | None:
    """The catalog note of ``acc`` that says what a bare alias means (``the bare alias 'rtx pro 6000' means this
    Workstation Edition ...``) when ``typed`` is that alias, as ``truepeak specs`` prints it; else None."""
    from truepeak.hardware.lookup import compact

    for note in acc.notes:
        if note.startswith("the bare alias '"):
            alias = note.split("'")[1]
            if compact(alias) == compact(typed):
                return note
    return None


def render(eff) -> list[str]:
    """The lines ``truepeak efficiency`` prints for an :class:`~truepeak.efficiency.Efficiency`."""
    u = eff.unit
    acc_note = "" if eff.accumulate == default_accumulate(eff.rate) else f", {eff.accumulate} accumulate"
    lines = [f"{eff.accelerator} · {eff.format} ({eff.rate} rate{acc_note})"]
    row = "  {:<22}{}".format
    src = f"  [{'derived; ' if eff.peak_derived else ''}{eff.peak_source}]"
    lines.append(row("dense peak", f"{fmt_rate(eff.dense_flops)} {u}{src}"))
    if eff.peak_note:
        lines.append(row("peak note", eff.peak_note))
    if eff.achieved_flops is not None:
        lines.append(row("achieved", f"{fmt_rate(eff.achieved_flops)} {u} = {fmt_pct(eff.pct_dense)} of the dense "
                                     "peak"))
    else:
        lines.append(row("achieved", "not given: bounds of the shape only (add --tflops or --time-ms for efficiency)"))
    if eff.sparse_trap:
        lines.append(row("sparse headline", eff.sparse_trap))
    if eff.peak_at_clock_flops is not None:
        pct = f"{fmt_pct(eff.pct_at_clock)} of " if eff.pct_at_clock is not None else ""
        lines.append(row("at measured clock", f"{pct}{fmt_rate(eff.peak_at_clock_flops)} {u} "
                                              f"(dense peak at {eff.clock_hz / 1e6:.0f} MHz)"))
    if eff.gemm is not None:
        lines.extend(_shape_lines(eff, row))
    for note in notes_of(eff):
        lines.append(f"note: {note}")
    lines.append(f"{u} = 1e12 {'integer ops' if u == 'TOPS' else 'FLOP'}/s, GB/s = 1e9 B/s (decimal); "
                 "efficiency is against the DENSE peak.")
    return lines


def _shape_lines(eff, row) -> list[str]:
    """The lines about the GEMM shape: counts, time, intensity and the roofline."""
    g, u = eff.gemm, eff.unit
    lines = [f"shape {g.label} (M x N x K), {g.format.name} in, {g.out_format.name} out"
             + (f", {g.scaling} fp32 scales" if g.scaling else "")]
    lines.append(row("FLOP", f"{eff.flop:.5g} (2·M·N·K)"))
    lines.append(row("min bytes", f"{fmt_bytes(eff.min_bytes)} = A {fmt_bytes(eff.a_bytes)} + weight B "
                                  f"{fmt_bytes(eff.b_bytes)} + C {fmt_bytes(eff.c_bytes)}"))
    floor = f"floor {fmt_time(eff.time_floor_s)}" if eff.time_floor_s is not None else ""
    if eff.time_s is not None:
        lines.append(row("time", f"{fmt_time(eff.time_s)} per GEMM" + (f"; {floor}" if floor else "")))
    elif floor:
        lines.append(row("time", f"{floor} per GEMM (max of FLOP / dense peak, bytes / bandwidth)"))
    if eff.ridge is None:
        lines.append(row("intensity", f"{eff.intensity:.4g} FLOP/B"))
        return lines
    lines.append(row("intensity", f"{eff.intensity:.4g} FLOP/B; ridge {eff.ridge:.4g} FLOP/B → {eff.bound}-bound"))
    how = (f"{fmt_bandwidth(eff.bandwidth)} GB/s × {eff.intensity:.4g} FLOP/B" if eff.bound == "memory"
           else "the dense peak")
    ach = f"; achieved {fmt_pct(eff.pct_roofline)} of it" if eff.pct_roofline is not None else ""
    lines.append(row("roofline ceiling", f"{fmt_rate(eff.attainable_flop_per_s)} {u} ({how}){ach}"))
    if eff.pct_bandwidth is not None:
        lines.append(row("memory bandwidth", f"{fmt_bandwidth(eff.achieved_bandwidth)} GB/s = "
                                             f"{fmt_pct(eff.pct_bandwidth)} of {fmt_bandwidth(eff.bandwidth)} GB/s "
                                             "— the percentage that matters for a memory-bound shape"))
    elif eff.bound == "memory" and eff.achieved_flops is None:
        lines.append(row("memory bandwidth", f"{fmt_bandwidth(eff.bandwidth)} GB/s — for a memory-bound shape the "
                                             "percentage that matters is of memory bandwidth"))
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
    from truepeak.efficiency import analyze
    from truepeak.formats import alias_note
    from truepeak.hardware import get_accelerator

    try:
        acc = get_accelerator(gpu)
        eff = analyze(acc, format, tflops=tflops, shape=shape, time_s=None if time_ms is None else time_ms * 1e-3,
                      accumulate=None if accumulate is None else accumulate.strip().lower(),
                      scaling=None if scaling is None else scaling.strip().lower(),
                      clock_hz=None if clock_mhz is None else clock_mhz * 1e6)
        read_as = alias_note(format)
    except MeasurementError as exc:  # a value: name its flag and the value as typed
        raise fail(flag_message(str(exc), name_bare_words=False), exc.exit_code) from None
    except TruepeakError as exc:
        raise fail(flag_message(str(exc)), exc.exit_code) from None
    if as_json:
        typer.echo(json.dumps(to_json(eff), indent=2))
    else:
        lines = render(eff)
        if read_as:
            lines.insert(1, f"  format read as: {read_as}")
        gpu_note = alias_gpu_note(acc, gpu)
        if gpu_note:
            lines.insert(1, f"  GPU read as: {gpu_note}")
        from truepeak.report.fit import stdout_width, wrap_lines

        for line in wrap_lines(lines, stdout_width()):
            typer.echo(line)
