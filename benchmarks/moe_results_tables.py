"""Markdown tables of `truepeak moe bench` records (the tables of docs/results/h200/moe/README.md).

For each (model, local experts, routing): one row per tokens per expert; for bf16 our kernel's % of the measured read
bandwidth and time, then the best other backend's; for fp8 ours (w8a8) and torch's ``_scaled_grouped_mm`` (w8a8,
the ``grouped_mm`` backend); for nvfp4 ours as w4a16 (the default since stop 13) and, where the records hold it, as
w4a8; for mxfp4 ours as w4a8 (no other backend runs fp4 on Hopper). Then, per format, how ours compares with the
issue's targets (#5), computed from the same records.

Usage: python3 benchmarks/moe_results_tables.py RECORDS.jsonl
"""
import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    recs = [json.loads(line) for line in open(path) if line.strip()]
    ok = [r for r in recs if r["status"] == "ok"]
    by = defaultdict(dict)  # (model, E, routing) -> {(fmt, tpe, backend): record}
    for r in ok:
        w = r["workload"]
        fmt = r["format"]
        if fmt in ("nvfp4", "mxfp4") and r["backend"] == "triton":  # which activations ran: w4a8 or w4a16
            fmt += " w4a8" if str(w.get("activations", "")).startswith("fp8") else " w4a16"
        by[(w["model"], w["E_local"], w["routing"])][(fmt, w["tokens_per_expert"], r["backend"])] = r

    def pct(r):
        return 100 * r["derived"]["pct_read_bandwidth"]

    def us(r):
        return r["derived"]["time_s"] * 1e6

    summary = defaultdict(list)  # fmt -> (tpe, pct, speedup vs best other or None)
    for (model, e, routing), pts in sorted(by.items(), key=lambda kv: (kv[0][2] != "uniform", kv[0][1] != 256,
                                                                        kv[0][0])):
        where = "E = 256 (all experts on one GPU)" if e == 256 else f"E_local = {e} (EP{256 // e}, {e} of 256 experts)"
        print(f"\n#### {model}, {where}, {routing}\n")
        fmts = [f for f in ("bf16", "fp8", "nvfp4 w4a16", "nvfp4 w4a8", "mxfp4 w4a8", "mxfp4 w4a16")
                if any(k[0] == f for k in pts)]
        head = {"bf16": "bf16: **ours** · best other", "fp8": "fp8 w8a8: **ours** · scaled_grouped_mm"}
        print("| tok/expert | " + " | ".join(head.get(f, f"{f}: **ours**") for f in fmts) + " |")
        print("|---:|" + "---|" * len(fmts))
        for t in sorted({k[1] for k in pts}):
            cells = []
            for fmt in fmts:
                ours = pts.get((fmt, t, "triton"))
                others = [r for (f, tt, b), r in pts.items() if f == fmt and tt == t and b != "triton"]
                best = min(others, key=us) if others else None
                cell = f"**{pct(ours):.1f}** ({us(ours):.0f})" if ours else "—"
                if best is not None:
                    cell += f" · {best['backend'] + ' ' if fmt == 'bf16' else ''}{pct(best):.1f} ({us(best):.0f})"
                cells.append(cell)
                if ours:
                    summary[fmt].append((t, pct(ours), us(best) / us(ours) if best else None, model, e, routing))
            print(f"| {t:g} | " + " | ".join(cells) + " |")

    print("\n#### Against the targets (ours; speed-up = best other backend's time / ours)\n")
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
    main(sys.argv[1])
