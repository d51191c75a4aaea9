"""Option values the CLI commands share: comma lists of names and numbers (``moe plan``, ``moe bench``)."""

from __future__ import annotations

from truepeak.errors import TruepeakError


def comma_items(text: str, what: str, example: str) -> list[str]:
    """The items of a comma list (``" tp8, ep8"`` → ``["tp8", "ep8"]``), stripped. The one list reader of ``moe plan``
    and ``moe bench`` (``--batch``, ``--tokens-per-expert``, ``--weights``, ``--backends``; ``--compare`` layouts go
    through :func:`truepeak.moe.layout.parse_layouts`, which applies the same rule).

    Raises:
        TruepeakError: no item at all (``"no --batch in ','; give e.g. 1,8,64,512"``), or an empty item between,
            before or after the others (``"--batch '1,,2' has an empty item; give e.g. 1,8,64,512"``: a doubled or
            stray comma is a typo, not a list of two); ``what`` names the option, ``example`` shows a good value.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise TruepeakError(f"no {what} in {text!r}; give e.g. {example}")
    if not all(parts):
        raise TruepeakError(f"{what} {text!r} has an empty item; give e.g. {example}")
    return parts


def number_list(text: str, what: str, convert=int, example: str = "1,8,64,512") -> list:
    """The comma-separated numbers of ``text`` (``"1, 8,64"`` → ``[1, 8, 64]``), each read by ``convert`` (``int``
    or ``float``). Shared by ``moe plan --batch`` and ``moe bench --tokens-per-expert``.

    Raises:
        TruepeakError: an item ``convert`` cannot read (``"--batch '1.5' is not a whole number; give e.g. ..."``), an
            empty item or no item at all (:func:`comma_items`); ``what`` names the option, ``example`` shows a good
            value.
    """
    kind = "a whole number" if convert is int else "a number"
    out = []
    for part in comma_items(text, what, example):
        try:
            out.append(convert(part))
        except ValueError:
            raise TruepeakError(f"{what} {part!r} is not {kind}; give e.g. {example}") from None
    return out


__all__ = ["comma_items", "number_list"]
