"""Speed of `truepeak moe plan --model deepseek-v3 --compare` (6 layouts x 8 batch sizes = 48 plans + 1).

Target: under 2 s on a 2-core CPU, as a whole command (interpreter start,
imports, config parsing, routing statistics, 49 plans, rendering). No GPU is used.

Run from the repository root:

    python3 benchmarks/moe_plan_speed.py [--repeat 5] [--out docs/results/cpu/moe_plan_speed.md]

It times the command REPEAT times in fresh interpreters (wall clock, ``time.perf_counter`` around ``subprocess.run``)
and the library call alone (``truepeak.moe.plan.compare`` over the same 48 cells, in-process, after one warm-up
of the imports, with the routing-statistics cache cleared before each run), and
writes a Markdown result with the command, the date, the commit, the machine and the median / min / max.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["-m", "truepeak", "moe", "plan", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--compare"]
LIMIT_S = 2.0


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    """The checked-out commit, and whether the tree differs from it ("unknown" outside a git checkout)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src"], cwd=ROOT).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"`{head}`" + (" with uncommitted changes in src/" if dirty else "")


def time_command(repeat: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, *COMMAND], cwd=ROOT, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"command failed ({r.returncode}): {r.stderr.strip()}")
        if "what-if" not in r.stdout:
            raise SystemExit("command printed no what-if table")
    return times


def time_library(repeat: int) -> list[float]:
    sys.path.insert(0, str(ROOT / "src"))
    from truepeak.hardware.lookup import get_accelerator
    from truepeak.moe.config import load_model
    from truepeak.moe import plan as planner
    from truepeak.moe.plan import DEFAULT_COMPARE_BATCHES, compare, default_compare_layouts

    model, acc = load_model("deepseek-v3"), get_accelerator("h200")
    layouts = default_compare_layouts(model, 8)
    assert len(layouts) == 6 and len(DEFAULT_COMPARE_BATCHES) == 8
    compare(model, acc, layouts, DEFAULT_COMPARE_BATCHES, weights="fp8")   # warm-up (imports, caches)
    times = []
    for _ in range(repeat):
        planner.clear_routing_cache()          # cold routing statistics each time, as in a fresh command
        t0 = time.perf_counter()
        cells = compare(model, acc, layouts, DEFAULT_COMPARE_BATCHES, weights="fp8")
        times.append(time.perf_counter() - t0)
        assert len(cells) == 48
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "docs/results/cpu/moe_plan_speed.md"))
    args = ap.parse_args()
    cmd = time_command(args.repeat)
    lib = time_library(args.repeat)
    med = statistics.median(cmd)
    verdict = "PASS" if med < LIMIT_S else "FAIL"
    text = "\n".join([
        "# `truepeak moe plan --compare` speed (CPU)",
        "",
        f"- Command: `PYTHONPATH=src python3 {' '.join(COMMAND)}` (6 layouts x 8 batch sizes = 48 plans, plus the "
        "detailed plan at batch 1)",
        f"- Benchmark: `python3 benchmarks/moe_plan_speed.py --repeat {args.repeat}`",
        f"- Date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- truepeak: commit {_commit()}",
        f"- Machine: {_cpu()}, {os.cpu_count()} CPUs visible, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()} (shared with other jobs while measured)",
        "",
        "| what | median | min | max | runs |",
        "| --- | --- | --- | --- | --- |",
        f"| whole command (fresh interpreter, wall clock) | {med:.3f} s | {min(cmd):.3f} s | {max(cmd):.3f} s | "
        f"{len(cmd)} |",
        f"| library `compare()` over the 48 cells (in-process, routing cache cleared) | {statistics.median(lib) * 1e3:.1f} ms | "
        f"{min(lib) * 1e3:.1f} ms | {max(lib) * 1e3:.1f} ms | {len(lib)} |",
        "",
        f"Target: whole command under {LIMIT_S:g} s → **{verdict}** (median {med:.3f} s).",
        "",
    ])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
