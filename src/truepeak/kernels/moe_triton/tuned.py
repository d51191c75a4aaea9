"""Tuned tables of the MoE kernels: the configuration ``truepeak moe tune`` measured fastest per weight format,
activations and tokens-per-expert bucket, one JSON file per GPU and expert shape, and the loader :class:`FusedMoE`
uses when it is built. Pure Python: nothing here imports torch or triton.

File names follow vLLM's tuned fused-MoE configs (``E={E},N={N},device_name={device_name}.json``,
``get_config_file_name`` in ``vllm-project/vllm:vllm/model_executor/layers/fused_moe/fused_moe.py``: E experts on the
GPU, N the expert width on the GPU, the device name as torch reports it with spaces replaced by underscores), with the
hidden size added (``H=``) because one file serves every model of that shape, and no dtype: one file holds every
format. vLLM keys a file by batch size; these tables key by tokens per expert (docs/method.md, 'Tokens per expert':
a decode batch is many small GEMMs of about tokens-per-expert rows each), in power-of-two buckets
(:func:`bucket_of`).

Shipped tables live in this package's ``tuned/`` folder (package data); a user passes a file or a folder of them.
"""

from __future__ import annotations

import json
import math
import operator
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from truepeak.errors import TruepeakError
from truepeak.kernels.moe_triton.config import KernelConfig, check_tokens_per_expert, check_wfmt, default_fp4_layout

#: The ``schema`` string of a tuned table.
SCHEMA = "truepeak.moe_tuned/1"
#: The tokens-per-expert buckets: powers of two from 1 to 1024.
BUCKETS = tuple(2 ** i for i in range(11))
#: The activations keys: ``bf16`` (bf16 weights), ``fp8`` (w8a8, w4a8), ``fp16`` (w8a16, w4a16).
ACTIVATIONS = ("bf16", "fp8", "fp16")


def bucket_of(tokens_per_expert: Any) -> int:
    """The bucket of a mean tokens per expert: the power of two nearest to it on a log scale (``t`` in
    ``[b / sqrt(2), b * sqrt(2))`` is bucket ``b``), at least 1 and at most 1024: 1.4 -> 1, 1.5 -> 2, 5.6 -> 4,
    6 -> 8, 23 -> 32, 5000 -> 1024.

    Raises:
        TruepeakError: not a finite number > 0."""
    t = max(check_tokens_per_expert(tokens_per_expert), 1.0)
    return min(BUCKETS[-1], 2 ** int(math.floor(math.log2(t) + 0.5)))


def token_blocks_per_expert(counts: Any, block_m: int) -> float:
    """Token blocks of ``block_m`` rows per expert that received any token: sum over experts of ceil(n / block_m),
    divided by the number of experts with n > 0 (1.0 when none has). ``counts``: tokens per local expert, ints.
    Example: counts [1, 0, 20, 3] with 16-row blocks: (1 + 2 + 1) / 3 = 1.33.

    Raises:
        TruepeakError: ``block_m`` not a positive integer, ``counts`` not a sequence of integers >= 0."""
    if isinstance(block_m, bool) or not isinstance(block_m, int) or block_m <= 0:
        raise TruepeakError(f"block_m must be a positive integer, got {block_m!r}")
    active = [c for c in check_counts(counts) if c > 0]
    return sum(-(-c // block_m) for c in active) / len(active) if active else 1.0


def check_counts(counts: Any) -> list[int]:
    """``counts`` (tokens per local expert: a sequence of integers >= 0, Python or numpy / torch integers) as a list
    of ints.

    Raises:
        TruepeakError: not a sequence (a string included), an item that is not an integer (a float, a bool), or a
            negative one."""
    if isinstance(counts, (str, bytes)) or not hasattr(counts, "__iter__"):
        raise TruepeakError(f"token counts must be a sequence of integers >= 0 (one per expert), got {counts!r}")
    out = []
    for c in counts:
        try:
            if isinstance(c, bool):
                raise TypeError
            n = operator.index(c)
        except TypeError:
            raise TruepeakError(f"token counts must be integers >= 0, got {c!r}") from None
        if n < 0:
            raise TruepeakError(f"token counts must be >= 0, got {n}")
        out.append(n)
    return out


def device_token(device_name: str) -> str:
    """The device part of a file name: the device name with spaces replaced by underscores (as vLLM's)."""
    return str(device_name).strip().replace(" ", "_")


def table_file_name(device_name: str, E: int, N: int, H: int) -> str:
    """``E=256,N=2048,H=7168,device_name=NVIDIA_H200.json``: ``E`` experts on the GPU, ``N`` the expert width on the
    GPU (I after TP), ``H`` the hidden size."""
    return f"E={E},N={N},H={H},device_name={device_token(device_name)}.json"


def package_dir() -> Path:
    """The folder of the shipped tables (package data)."""
    return Path(__file__).resolve().parent / "tuned"


def activations_key(wfmt: str, activations: str | None) -> str:
    """The table's activations key of a weight format and the activations :class:`FusedMoE` runs it with:
    ``bf16`` for bf16 weights, else ``fp8`` or ``fp16``.

    Raises:
        TruepeakError: activations other than those (or any but None / bf16 with bf16 weights)."""
    check_wfmt(wfmt)
    a = "bf16" if wfmt == "bf16" and activations in (None, "bf16") else activations
    if a not in ACTIVATIONS or (wfmt == "bf16") != (a == "bf16"):
        raise TruepeakError(f"activations {activations!r} with {wfmt} weights: bf16 weights take bf16 activations, "
                            "the others fp8 or fp16")
    return a


@dataclass(frozen=True)
class TunedEntry:
    """The chosen configuration of one (format, activations, bucket): the two kernels' configurations, the time of
    the whole unit (seconds), the fraction of the read bandwidth it reached (``read_bandwidth_fraction``), that of
    :func:`choose_config`'s configuration at the same point in the same run, the tokens per expert measured, how
    many candidates were timed, and for fp4 weights the weight layout the kernels ran (``"mma"`` or ``"tiles"``,
    :class:`FusedMoE`'s ``fp4_layout``): an entry serves only that layout."""

    gate_up: KernelConfig
    down: KernelConfig
    tokens_per_expert: float
    time_s: float
    read_bandwidth_fraction: float
    default_read_bandwidth_fraction: float | None = None
    default_time_s: float | None = None
    candidates: int = 0
    fp4_layout: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gate_up"], d["down"] = asdict(self.gate_up), asdict(self.down)
        if d["fp4_layout"] is None:
            del d["fp4_layout"]
        return d


@dataclass(frozen=True)
class TunedTable:
    """A tuned table: one GPU (``device_name`` as torch reports it) and expert shape (``E`` experts on the GPU,
    expert width ``N``, hidden size ``H``), the entries keyed by ``(weight format, activations, bucket)``, and how it
    was made: model and layout the shape came from, routing, date (UTC, ISO 8601), truepeak commit and version,
    the read bandwidth measured in the same run (bytes/s)."""

    device_name: str
    E: int
    N: int
    H: int
    entries: Mapping[tuple[str, str, int], TunedEntry] = field(default_factory=dict)
    model: str | None = None
    layout: str | None = None
    routing: str = "uniform"
    date: str | None = None
    truepeak_commit: str | None = None
    truepeak_version: str | None = None
    read_bandwidth_bytes_per_s: float | None = None

    @property
    def file_name(self) -> str:
        return table_file_name(self.device_name, self.E, self.N, self.H)

    def lookup(self, wfmt: str, activations: str | None, tokens_per_expert: float) -> TunedEntry | None:
        """The entry of ``tokens_per_expert``'s bucket (:func:`bucket_of`), or None when the table has none."""
        return self.entries.get((wfmt, activations_key(wfmt, activations), bucket_of(tokens_per_expert)))

    def lookup_for_counts(self, wfmt: str, activations: str | None, tokens_per_expert: float, counts: Any,
                          fp4_layout: str | None = None) -> tuple[int, TunedEntry] | None:
        """The entry for a routing whose local experts received ``counts`` tokens (a sequence of ints, one per
        expert): among the entry of ``tokens_per_expert``'s bucket and those of larger buckets (same format,
        activations and, for fp4, ``fp4_layout``: None is the format's :func:`default_fp4_layout`) whose token
        block runs fewer :func:`token_blocks_per_expert` for ``counts`` than it, the one with the highest
        ``read_bandwidth_fraction`` / token blocks per expert; ``(bucket, entry)``, or None when the table has no
        entry for ``tokens_per_expert``'s bucket (as :meth:`lookup`) or, for fp4, that entry was tuned for another
        layout.

        Why: an expert with n tokens runs ceil(n / block_m) token blocks, each reading the expert's weight tiles
        again, so under a skewed routing (the busiest experts receive far more than the mean) the small token block
        of the mean's entry re-reads the busy experts' weights, while a larger block reads them once at a small
        cost in padding. With uniform routing a larger block saves no block and the mean's entry stays the choice.
        Measured on an H200 (docs/results/h200/moe-routing/README.md): DeepSeek-V3, power-law 1.2 at a mean of 8
        tokens per expert, bf16 83.8 % of the read bandwidth with the mean's entry, 95.4 % with the entry this picks
        (bucket 32), the fastest of the table's entries there.

        Raises:
            TruepeakError: ``counts`` not E integers >= 0 (:func:`check_counts`), ``fp4_layout`` other than None,
                ``"mma"`` or ``"tiles"``, or what :func:`bucket_of` and :func:`activations_key` refuse."""
        a = activations_key(wfmt, activations)
        b0 = bucket_of(tokens_per_expert)
        fp4_layout = _fp4_layout_of(wfmt, fp4_layout)
        counts = check_counts(counts)
        if len(counts) != self.E:
            raise TruepeakError(f"token counts for {len(counts)} experts; this table is for E={self.E} (one count per "
                                "local expert)")
        base = self.entries.get((wfmt, a, b0))
        if base is None or base.fp4_layout != fp4_layout:
            return None
        r0 = token_blocks_per_expert(counts, base.gate_up.block_m)
        best = (base.read_bandwidth_fraction / r0, b0, base)
        for (w, ac, b), e in sorted(self.entries.items(), key=lambda kv: kv[0][2]):
            if w != wfmt or ac != a or b <= b0 or e.fp4_layout != fp4_layout:
                continue
            r = token_blocks_per_expert(counts, e.gate_up.block_m)
            if r < r0 and e.read_bandwidth_fraction / r > best[0]:
                best = (e.read_bandwidth_fraction / r, b, e)
        return best[1], best[2]

    def mismatch(self, device_name: str, E: int, N: int, H: int) -> str | None:
        """Why this table does not serve ``device_name`` and shape (E, N, H), or None when it does."""
        if device_token(device_name) != device_token(self.device_name):
            return f"is for {self.device_name}, not {device_name}"
        if (self.E, self.N, self.H) != (E, N, H):
            return f"is for experts E={self.E}, N={self.N}, H={self.H}, not E={E}, N={N}, H={H}"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the table's fields, then ``configs[format][activations][bucket]`` (bucket as text)."""
        configs: dict[str, dict[str, dict[str, Any]]] = {}
        for (w, a, b), e in sorted(self.entries.items()):
            configs.setdefault(w, {}).setdefault(a, {})[str(b)] = e.to_dict()
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "entries"}
        return {"schema": SCHEMA, **head, "file_name": self.file_name, "configs": configs}

    @classmethod
    def from_dict(cls, data: Any, source: str = "tuned table") -> TunedTable:
        """Read the JSON form back, checking every field.

        Raises:
            TruepeakError: one line naming ``source`` and the first field that is wrong."""
        def bad(what: str) -> TruepeakError:
            return TruepeakError(f"{source} is not a truepeak tuned table: {what}")

        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            got = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise bad(f"schema {got!r}, expected {SCHEMA!r}")
        head: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "entries":
                continue
            v = data.get(f.name)
            if f.name in ("E", "N", "H"):
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise bad(f"{f.name}={v!r}, expected a positive integer")
            elif f.name == "device_name":
                if not isinstance(v, str) or not v.strip():
                    raise bad(f"device_name={v!r}, expected the device's name")
            elif f.name == "read_bandwidth_bytes_per_s":
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
                    raise bad(f"read_bandwidth_bytes_per_s={v!r}, expected bytes/s > 0")
            elif v is not None and not isinstance(v, str):
                raise bad(f"{f.name}={v!r}, expected text")
            if v is not None:
                head[f.name] = v
        configs = data.get("configs")
        if not isinstance(configs, dict):
            raise bad("no 'configs' object")
        entries: dict[tuple[str, str, int], TunedEntry] = {}
        for w, by_act in configs.items():
            try:
                check_wfmt(w)
            except TruepeakError as exc:
                raise bad(f"configs[{w!r}]: {exc}") from None
            for a, by_bucket in (by_act.items() if isinstance(by_act, dict) else [(None, None)]):
                for b, e in (by_bucket.items() if isinstance(by_bucket, dict) else [(None, None)]):
                    where = f"configs[{w!r}][{a!r}][{b!r}]"
                    try:
                        check_wfmt(w)
                        key = (w, activations_key(w, a), int(b))
                        if key[2] not in BUCKETS or str(key[2]) != b:
                            raise TruepeakError(f"bucket {b!r} is not one of {', '.join(map(str, BUCKETS))}")
                        entries[key] = _entry(e)
                    except (TruepeakError, TypeError, ValueError, KeyError) as exc:
                        raise bad(f"{where}: {exc}") from None
        return cls(entries=entries, **head)


def _entry(e: Any) -> TunedEntry:
    if not isinstance(e, dict):
        raise TruepeakError(f"an entry is an object, not {type(e).__name__}")
    cfgs = [KernelConfig(**e[k]) for k in ("gate_up", "down")]
    if cfgs[0].block_m != cfgs[1].block_m:
        raise TruepeakError("gate_up and down must share block_m")
    nums = {}
    for k in ("tokens_per_expert", "time_s", "read_bandwidth_fraction"):
        v = e[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not math.isfinite(v):
            raise TruepeakError(f"{k}={v!r}, expected a finite number > 0")
        nums[k] = float(v)
    opt = {k: e.get(k) for k in ("default_read_bandwidth_fraction", "default_time_s") if e.get(k) is not None}
    layout = e.get("fp4_layout")
    if layout not in (None, "mma", "tiles"):
        raise TruepeakError(f"fp4_layout={layout!r}, expected 'mma' or 'tiles'")
    return TunedEntry(cfgs[0], cfgs[1], candidates=int(e.get("candidates", 0)), fp4_layout=layout, **nums, **opt)


def load_table(path: str | os.PathLike[str]) -> TunedTable:
    """Read one tuned table file.

    Raises:
        TruepeakError: the file cannot be read, is not JSON, or is not a tuned table (one line naming the file and
            the field)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise TruepeakError(f"cannot read the tuned table {p}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TruepeakError(f"the tuned table {p} is not JSON: {exc}") from None
    return TunedTable.from_dict(data, source=f"tuned table {p.name}")


def find_table(device_name: str, E: int, N: int, H: int, path: str | os.PathLike[str] | None = None
               ) -> tuple[TunedTable | None, str]:
    """The tuned table for ``device_name`` and expert shape (E, N, H), and a one-line note saying where it came from
    or why there is none.

    ``path`` (a user's table file, or a folder of them) is tried first, then the shipped tables (:func:`package_dir`).
    A file given as ``path`` that is for another GPU or shape, or is not a valid table, is rejected with its reason
    and the search goes on to the shipped tables. Returns ``(None, note)`` when no table serves the device and shape
    (the caller then uses :func:`choose_config`'s rules)."""
    name = table_file_name(device_name, E, N, H)
    rejected = []
    places: list[Path] = []
    if path is not None:
        p = Path(path)
        if p.is_dir():
            places.append(p / name)
        else:
            try:
                table = load_table(p)
            except TruepeakError as exc:
                rejected.append(str(exc))
            else:
                why = table.mismatch(device_name, E, N, H)
                if why is None:
                    return table, f"tuned table {p}"
                rejected.append(f"tuned table {p.name} {why}")
    places.append(package_dir() / name)
    for p in places:
        if not p.is_file():
            continue
        try:
            table = load_table(p)
        except TruepeakError as exc:
            rejected.append(str(exc))
            continue
        why = table.mismatch(device_name, E, N, H)
        if why is None:
            note = f"tuned table {p.name}" if p.parent == package_dir() else f"tuned table {p}"
            return table, note + (f" ({'; '.join(rejected)})" if rejected else "")
        rejected.append(f"tuned table {p.name} {why}")
    reason = "; ".join(rejected) if rejected else f"no tuned table {name}"
    return None, f"{reason}: choose_config's rules"


def nearest_table(device_name: str, E: int, N: int, H: int) -> TunedTable | None:
    """The shipped table of ``device_name`` whose expert shape is nearest to (E, N, H), for a tuner to start from
    when none is shipped for the shape itself: the same GPU, then the fewest of E, N, H that differ, then the smallest
    relative difference (|log2| of each ratio, summed); None when no shipped table is for this GPU. Not for
    :class:`FusedMoE`: a configuration tuned for one shape is only a starting point for another."""
    best: tuple[tuple[int, float], TunedTable] | None = None
    for p in sorted(package_dir().glob("*.json")):
        try:
            t = load_table(p)
        except TruepeakError:
            continue
        if device_token(t.device_name) != device_token(device_name):
            continue
        pairs = ((t.E, E), (t.N, N), (t.H, H))
        rank = (sum(a != b for a, b in pairs), sum(abs(math.log2(a / b)) for a, b in pairs))
        if best is None or rank < best[0]:
            best = (rank, t)
    return None if best is None else best[1]


def tuned_pair(device_name: str, wfmt: str, activations: str | None, E: int, N: int, H: int,
               tokens_per_expert: float, path: str | os.PathLike[str] | None = None, fp4_layout: str | None = None,
               counts: Any = None) -> tuple[tuple[KernelConfig, KernelConfig] | None, str]:
    """The tuned (gate/up, down) configurations for one launch, and a one-line note: where they came from (table and
    bucket), or why there are none (:func:`find_table`'s reason, no entry for the format, activations and bucket,
    or an fp4 entry tuned for another weight layout than ``fp4_layout``, the one the launch runs; None: the format's
    default, :func:`default_fp4_layout`), ending in "choose_config's rules" then. With ``counts`` (tokens per local
    expert) the entry is :meth:`TunedTable.lookup_for_counts`'s, and the note names its bucket when it is not the
    mean's.

    Raises:
        TruepeakError: ``fp4_layout`` other than None, ``"mma"`` or ``"tiles"`` (ignored for other formats),
            ``device_name`` not a name, E, N or H not positive integers, ``counts`` not integers >= 0."""
    fp4_layout = _fp4_layout_of(wfmt, fp4_layout)
    if not isinstance(device_name, str) or not device_name.strip():
        raise TruepeakError(f"device_name must be a GPU's name as torch reports it, got {device_name!r}")
    for name, v in (("E", E), ("N", N), ("H", H)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise TruepeakError(f"{name} must be a positive integer, got {v!r}")
    table, note = find_table(device_name, E, N, H, path)
    if table is None:
        return None, note
    b0 = bucket_of(tokens_per_expert)
    key = f"{wfmt}, {activations_key(wfmt, activations)} activations, bucket {b0}"
    entry = table.lookup(wfmt, activations, tokens_per_expert)
    if entry is None:
        return None, f"{note} has no entry for {key}: choose_config's rules"
    if wfmt in ("nvfp4", "mxfp4") and entry.fp4_layout != fp4_layout:
        return None, (f"{note}: its entry for {key} was tuned for the {entry.fp4_layout or 'unnamed'} fp4 layout, "
                      f"not {fp4_layout}: choose_config's rules")
    if counts is not None:
        bucket, chosen = table.lookup_for_counts(wfmt, activations, tokens_per_expert, counts, fp4_layout)
        if bucket != b0:
            key += (f", skewed routing: the entry of bucket {bucket} ("
                    f"{token_blocks_per_expert(counts, chosen.gate_up.block_m):.2f} token blocks per active expert "
                    f"against {token_blocks_per_expert(counts, entry.gate_up.block_m):.2f})")
            entry = chosen
    return (entry.gate_up, entry.down), f"{note}, {key}" + (f", {fp4_layout} layout" if fp4_layout else "")


def _fp4_layout_of(wfmt: str, fp4_layout: str | None) -> str | None:
    """The fp4 layout a launch of ``wfmt`` weights runs: ``fp4_layout``, or the format's default when None; None for
    formats that are not fp4."""
    if fp4_layout not in (None, "mma", "tiles"):
        raise TruepeakError(f"fp4_layout must be 'mma' or 'tiles' (or None: the format's default), got "
                            f"{fp4_layout!r}")
    if wfmt not in ("nvfp4", "mxfp4"):
        return None
    return fp4_layout or default_fp4_layout(wfmt)


def write_table(table: TunedTable, folder: str | os.PathLike[str]) -> Path:
    """Write ``table`` as ``folder/<file name>`` (the whole file replaced at once: written beside it, then renamed);
    returns the path.

    Raises:
        TruepeakError: the folder cannot be created or written."""
    out = Path(folder) / table.file_name
    tmp = out.with_suffix(".json.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(table.to_dict(), indent=1) + "\n")
        os.replace(tmp, out)
    except OSError as exc:
        raise TruepeakError(f"cannot write the tuned table {out}: {exc.strerror or exc}") from None
    return out


__all__ = ["ACTIVATIONS", "BUCKETS", "SCHEMA", "TunedEntry", "TunedTable", "activations_key", "bucket_of",
           "device_token", "find_table", "load_table", "nearest_table", "package_dir", "table_file_name", "tuned_pair",
           "write_table"]
