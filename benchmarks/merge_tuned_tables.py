"""Merge ``truepeak moe tune`` tables of one GPU and expert shape: the entries of each later table replace those of
the same (format, activations, bucket) in the earlier ones; the header (date, commit, read bandwidth) is the last
table's. For a re-tune of some points only (``--tokens-per-expert 16,32``) on top of a whole table.

Usage: PYTHONPATH=src python3 benchmarks/merge_tuned_tables.py OUT_FILE TABLE [TABLE ...]
"""
import dataclasses
import sys
from pathlib import Path

from truepeak.kernels.moe_triton.tuned import load_table, write_table

out, paths = Path(sys.argv[1]), sys.argv[2:]
tables = [load_table(p) for p in paths]
first = tables[0]
for t in tables[1:]:
    why = t.mismatch(first.device_name, first.E, first.N, first.H)
    if why:
        sys.exit(f"{t.file_name}: {why}")
entries = {}
for t in tables:
    entries.update(t.entries)
merged = dataclasses.replace(tables[-1], entries=entries)
if merged.file_name != out.name:
    sys.exit(f"{out} should be named {merged.file_name}")
print(write_table(merged, out.parent), f"{len(entries)} entries")
