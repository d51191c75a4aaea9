"""Markdown tables of `truepeak moe bench` records (docs/results/h200/moe/tables.md and the README's tables).

For each (model, local experts, routing, layout): one row per tokens per expert; for bf16 our kernel's % of the
measured read bandwidth and time, then the best other backend's; for fp8 ours (w8a8, and w8a16 where the records hold
it) and torch's ``_scaled_grouped_mm`` (w8a8, the ``grouped_mm`` backend); for nvfp4 ours as w4a16 (its default) and,
where the records hold it, as w4a8; for mxfp4 ours as w4a8 (no other backend runs fp4 on Hopper); the block-scaled
kernel's records in their own columns (activations, and "emulated" where the device did not run the block-scaled MMA).
Then, per format, the ranges of ours over all cases by tokens per expert, and the speed-up over the best other
backend, computed from the same records. A point present twice (two runs' records) is reported on stderr and the
later one shown.

Usage: python3 benchmarks/moe_experts_tables.py RECORDS.jsonl[.gz] [MORE.jsonl ...]   (records of several files are
read in order, as one stream)
"""
import sys
from collections import defaultdict


def label(r: dict) -> str:
    """The column a record belongs to: the weight format, and for quantised weights the activations that ran
    (fp8: w8a8 or w8a16; fp4 with the dequantising kernels: w4a8 or w4a16; the block-scaled kernel: its activation
    format, marked emulated where the device did not run the block-scaled MMA itself)."""
    w, fmt = r["workload"], r["format"]
    acts = str(w.get("activations", ""))
    if r["backend"] != "triton" or fmt == "bf16":
        return fmt
    if w.get("fp4_kernel") == "block-scaled":
        return f"{fmt} x {acts.split(' ')[0]} block-scaled{'' if w.get('native') else ', emulated'}"
    if fmt.startswith("fp8"):
        return fmt if acts.startswith("fp8") else f"{fmt} w8a16"
    return fmt + (" w4a8" if acts.startswith("fp8") else " w4a16")


def read_records(paths: list[str]) -> list[dict]:
    """The records of ``paths`` in order (any schema truepeak reads, plain or gzip-compressed), as schema-3 dicts."""
    from truepeak import records

    return [r.to_dict() for path in paths for r in records.read_records(path)]


def main(paths: list[str]) -> None:
    recs = read_records(paths)
    ok = [r for r in recs if r["status"] == "ok"]
    by = defaultdict(dict)  # (model, E, routing, layout) -> {(fmt, tpe, backend): record}
    for r in ok:
        w = r["workload"]
        fmt = label(r)
        key = (fmt, w["tokens_per_expert"], r["backend"])
        group = (w["model"], w["E_local"], w["routing"], w.get("layout", "single"))
        if key in by[group]:  # two calls' records of one point: say so rather than keep one silently
            print(f"warning: {group} {key} appears more than once; the later record is shown", file=sys.stderr)
        by[group][key] = r

    def pct(r):
        return 100 * r["derived"]["read_bandwidth_fraction"]

    def us(r):
        return r["derived"]["time_s"] * 1e6

    summary = defaultdict(list)  # fmt -> (tpe, pct, speedup vs best other or None)
    for (model, e, routing, layout), pts in sorted(by.items(), key=lambda kv: (kv[0][2] != "uniform",
                                                                                kv[0][3] != "single", kv[0][0])):
        where = (f"E = {e} (all experts on one GPU)" if layout == "single" else
                 f"E_local = {e} ({layout.upper()}, {e} experts on this GPU)")
        print(f"\n#### {model}, {where}, {routing}\n")
        known = ("bf16", "fp8", "fp8 w8a16", "nvfp4 w4a16", "nvfp4 w4a8", "mxfp4 w4a8", "mxfp4 w4a16")
        fmts = [f for f in known if any(k[0] == f for k in pts)]
        fmts += sorted({k[0] for k in pts} - set(known) - {"fp8_block"})
        head = {"bf16": "bf16: **ours** · best other", "fp8": "fp8 w8a8: **ours** · scaled_grouped_mm",
                "fp8 w8a16": "fp8 w8a16: **ours** · scaled_grouped_mm (w8a8)"}
        print("| tok/expert | " + " | ".join(head.get(f, f"{f}: **ours**") for f in fmts) + " |")
        print("|---:|" + "---|" * len(fmts))
        for t in sorted({k[1] for k in pts}):
            cells = []
            for fmt in fmts:
                ours = pts.get((fmt, t, "triton"))
                base = fmt.split(" ")[0]  # the torch backends' records carry the bare weight format
                others = [r for (f, tt, b), r in pts.items() if f == base and tt == t and b != "triton"]
                best = min(others, key=us) if others else None
                cell = f"**{pct(ours):.1f}** ({us(ours):.0f})" if ours else "—"
                if best is not None:
                    cell += f" · {best['backend'] + ' ' if fmt == 'bf16' else ''}{pct(best):.1f} ({us(best):.0f})"
                cells.append(cell)
                if ours:
                    summary[fmt].append((t, pct(ours), us(best) / us(ours) if best else None, model, e, routing))
            print(f"| {t:g} | " + " | ".join(cells) + " |")

    print("\n#### Ranges over all cases (ours; speed-up = best other backend's time / ours)\n")
    print("| format | ≤ 8 tok/expert: % read bw | 16–32: % read bw | 64–256: speed-up vs best other | "
          "≤ 32: slowest speed-up vs best other |")
    print("|---|---|---|---|---|")
    for fmt, rows in summary.items():
        def rng(sel):
            v = [p for t, p, *_ in rows if sel(t)]
            return f"{min(v):.1f}–{max(v):.1f}" if v else "—"

        def spd(sel):
            v = [s for t, _, s, *_ in rows if sel(t) and s is not None]
            return f"{min(v):.2f}–{max(v):.2f}×" if v else "no other backend"

        low = [s for t, _, s, *_ in rows if t <= 32 and s is not None]
        print(f"| {fmt} | {rng(lambda t: t <= 8)} | {rng(lambda t: 16 <= t <= 32)} | {spd(lambda t: t >= 64)} | "
              f"{(f'{min(low):.2f}×' if low else 'no other backend')} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python3 benchmarks/moe_experts_tables.py RECORDS.jsonl[.gz] [MORE.jsonl ...]", file=sys.stderr)
        raise SystemExit(2)
    main(sys.argv[1:])
