"""Name lookup: marketing names, device strings and aliases -> one catalog :class:`Accelerator`, with no substring traps.

A name is normalised to *tokens*: lower case, every character other than a-z and 0-9 is a separator, and vendor or
filler words (``nvidia``, ``amd``, ``instinct``, ``geforce``, ``tesla``, ``edition``, ``generation``, ``gpu``) are
dropped. ``"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"`` becomes
``rtx pro 6000 blackwell max q workstation``. Two rules, in order:

1. **Exact**: the tokens joined without separators (``rtxpro6000blackwellmaxqworkstation``) equal those of a catalog
   key, marketing name, device name or alias. So case, spaces and hyphens do not matter (``h200-nvl`` = ``H200 NVL``
   = ``h200nvl``), but ``gb300`` is never ``b300`` and ``l40s`` is never ``l4``: a token is matched whole, never as a
   substring (the ``"l40s" in name`` trap of pytorch/torchtitan's ``get_peak_flops``).
2. **Form-factor suffix**: a device string the catalog does not list exactly (``"NVIDIA B300 SXM6 AC"``) is accepted
   when its tokens include all of one catalog name's tokens and every extra token is a harmless qualifier for that
   entry: a form factor (``sxm``, ``sxm4``, ``sxm5``, ``sxm6``, ``ac``, ``oam``, ``hgx``, ``dgx``, ``vf``), the
   architecture name, the entry's own memory size (``80gb`` on an 80 GB part, never ``40gb``) or memory type
   (``hbm3``). Tokens that tell SKUs apart (``pcie``, ``nvl``, ``max``, ``q``, ``server``, ``workstation``, a different
   memory size) are never harmless, and the rule applies only when exactly one accelerator qualifies.

Unknown or ambiguous names raise :class:`~truepeak.errors.UnknownNameError` naming the closest known accelerators;
there is no default accelerator and no default peak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from truepeak.errors import UnknownNameError, closest
from truepeak.hardware.catalog import Accelerator, Catalog, load_catalog

#: Words that never tell two SKUs apart; dropped before matching.
NOISE_TOKENS = frozenset({"nvidia", "amd", "instinct", "geforce", "tesla", "edition", "generation", "gpu"})

#: Extra tokens allowed by the form-factor rule for any entry (they do not distinguish SKUs in the catalog).
FORM_FACTOR_TOKENS = frozenset({"sxm", "sxm2", "sxm3", "sxm4", "sxm5", "sxm6", "ac", "oam", "hgx", "dgx", "vf"})

#: Architecture words allowed as extras by the form-factor rule.
ARCH_TOKENS = frozenset({"ampere", "ada", "lovelace", "hopper", "blackwell", "cdna3", "cdna4"})

_SPLIT = re.compile(r"[^a-z0-9]+")
_MEMORY_TOKEN = re.compile(r"^(\d+)gb$")


def tokens(name: str) -> tuple[str, ...]:
    """Normalised tokens of a name, in order (see the module docstring)."""
    return tuple(t for t in _SPLIT.split(str(name).lower()) if t and t not in NOISE_TOKENS)


def compact(name: str) -> str:
    """The exact-match key of a name: its tokens joined without separators (``"H200 NVL"`` -> ``"h200nvl"``)."""
    return "".join(tokens(name))


@dataclass(frozen=True)
class _Index:
    exact: dict[str, Accelerator]
    token_sets: tuple[tuple[frozenset[str], Accelerator], ...]
    display: dict[str, Accelerator]  # every spelling, as written in the catalog -> accelerator


def _names(acc: Accelerator) -> tuple[str, ...]:
    return (acc.key, acc.name, *acc.device_names, *acc.aliases)


_INDEXES: dict[int, tuple[Catalog, _Index]] = {}


def _index(catalog: Catalog) -> _Index:
    """The name index of ``catalog``, built once per catalog object (checks that no two entries share a name)."""
    cached = _INDEXES.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        return cached[1]
    index = _build_index(catalog)
    _INDEXES[id(catalog)] = (catalog, index)
    return index


def _build_index(catalog: Catalog) -> _Index:
    exact: dict[str, Accelerator] = {}
    token_sets: list[tuple[frozenset[str], Accelerator]] = []
    display: dict[str, Accelerator] = {}
    for acc in catalog.accelerators:
        for name in _names(acc):
            key = compact(name)
            if not key:
                raise ValueError(f"catalog: {acc.key}: name {name!r} has no tokens")
            other = exact.get(key)
            if other is not None and other.key != acc.key:
                raise ValueError(f"catalog: name {name!r} of {acc.key} collides with {other.key} (normalised {key!r})")
            exact[key] = acc
            token_sets.append((frozenset(tokens(name)), acc))
            display[name] = acc
    return _Index(exact, tuple(token_sets), display)


def _harmless(token: str, acc: Accelerator) -> bool:
    """Whether ``token`` may follow a catalog name of ``acc`` without naming a different SKU."""
    if token in FORM_FACTOR_TOKENS or token in ARCH_TOKENS:
        return True
    m = _MEMORY_TOKEN.match(token)
    if m and acc.memory_bytes is not None:
        return int(m.group(1)) == round(acc.memory_bytes.value / 1e9)
    if acc.memory_type:
        own = _SPLIT.split(acc.memory_type.lower())[0]
        return token == own
    return False


def _suffix_candidates(name: str, index: _Index) -> list[Accelerator]:
    given = frozenset(tokens(name))
    found: dict[str, Accelerator] = {}
    for base, acc in index.token_sets:
        if not base or not base <= given:  # equal sets: the same words in another order
            continue
        if not any(ch.isdigit() for t in base for ch in t):  # a model number must be part of the match
            continue
        if all(_harmless(t, acc) for t in given - base):
            found[acc.key] = acc
    return list(found.values())


def match_device_name(name: str, catalog: Catalog | None = None) -> Accelerator | None:
    """The accelerator a name denotes, or None if unknown or ambiguous. Never raises for an unknown name.

    Accepts catalog keys (``"h200-sxm"``), marketing names, exact ``torch.cuda.get_device_name()`` / NVML strings
    (``"NVIDIA H100 80GB HBM3"``, ``"NVIDIA A100-SXM4-80GB"``, ``"AMD Instinct MI300X"``), aliases (``"5090"``,
    ``"rtx-pro-6000-ws"``), and device strings with an unlisted harmless form-factor suffix (``"NVIDIA B300 SXM6 AC"``).
    Matching rules: module docstring.
    """
    index = _index(catalog or load_catalog())
    hit = index.exact.get(compact(name))
    if hit is not None:
        return hit
    candidates = _suffix_candidates(name, index)
    return candidates[0] if len(candidates) == 1 else None


def get_accelerator(name: str | Accelerator, catalog: Catalog | None = None) -> Accelerator:
    """Look up an accelerator by any name :func:`match_device_name` accepts.

    Raises:
        UnknownNameError: the name matches no entry, or (form-factor rule) more than one; the one-line message lists
            the closest known accelerators and points to ``truepeak specs``. No default is ever substituted.
    """
    if isinstance(name, Accelerator):
        return name
    cat = catalog or load_catalog()
    acc = match_device_name(name, cat)
    if acc is not None:
        return acc
    index = _index(cat)
    candidates = _suffix_candidates(name, index)
    if len(candidates) > 1:
        names = ", ".join(a.name for a in candidates)
        raise UnknownNameError(f"accelerator name {name!r} is ambiguous: it could be {names}; give the exact name")
    near = closest_accelerators(name, cat)
    hint = f"; closest: {', '.join(near)}" if near else ""
    raise UnknownNameError(
        f"unknown accelerator {name!r}{hint}; `truepeak specs` lists all {len(cat.accelerators)} known accelerators"
    )


def closest_accelerators(name: str, catalog: Catalog | None = None, n: int = 4) -> list[str]:
    """Marketing names of up to ``n`` accelerators whose names or aliases are closest to ``name`` (best first)."""
    index = _index(catalog or load_catalog())
    spellings = list(index.display)
    # Compare normalised spellings so "NVIDIA" prefixes and hyphens do not dominate the similarity.
    by_compact: dict[str, str] = {}
    for s in spellings:
        by_compact.setdefault(compact(s), s)
    out: list[str] = []
    for hit in closest(compact(name) or str(name), by_compact, n=4 * n):
        acc = index.display[by_compact[hit]]
        if acc.name not in out:
            out.append(acc.name)
        if len(out) == n:
            break
    return out


def environment_device(env) -> tuple[str | None, str | None]:
    """``(catalog key, name)`` of the device a record's environment (:class:`truepeak.records.Environment`) says it
    was measured on. A record with ``env.device`` (``truepeak run``, ``peak``, ``moe bench``) says so itself: its
    catalog key when it matched the catalog, ``"cpu"`` for a CPU, else None. One without it (``truepeak comm``
    records carry only ``env.gpu``) is matched from the GPU's reported name by :func:`match_device_name` (exact
    device strings, no substring guesses). ``(None, None)`` when the record names no device."""
    if env is None:
        return None, None
    dev = getattr(env, "device", None)
    if dev is not None:
        if dev.matched_catalog and dev.accelerator:
            return dev.accelerator, dev.name
        return ("cpu" if dev.kind == "cpu" else None), dev.name
    gpu = getattr(env, "gpu", None)
    if gpu is not None and gpu.name and gpu.name.strip():
        acc = match_device_name(gpu.name)
        return (acc.key if acc is not None else None), gpu.name
    return None, None
