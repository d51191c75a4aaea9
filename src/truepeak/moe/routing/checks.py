"""Input checks shared by the routing modules: whole counts, and a (T, k, E, EP) that fits together."""

from __future__ import annotations

from truepeak.errors import TruepeakError


def _check_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numbers
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise TruepeakError(f"{name} {value!r} must be an integer >= {minimum}") from None
    if value < minimum:
        hint = "; a decode step routes at least one token" if name.startswith("tokens") else ""
        raise TruepeakError(f"{name} {value!r} must be an integer >= {minimum}{hint}")
    return value


def _check_tke(tokens: int, top_k: int, num_experts: int, ep: int = 1) -> tuple[int, int, int, int]:
    t = _check_int("tokens T", tokens)
    e = _check_int("num_experts E", num_experts)
    k = _check_int("top_k", top_k)
    if k > e:
        raise TruepeakError(f"top_k {k} exceeds the {e} experts: each token picks top_k distinct experts")
    g = _check_int("ep", ep)
    if e % g:
        divisors = [d for d in range(1, e + 1) if e % d == 0]
        raise TruepeakError(f"ep {g} does not divide the {e} experts (contiguous placement needs E/ep experts per "
                            f"GPU); use one of {', '.join(map(str, divisors))}")
    return t, k, e, g
