"""Option values the CLI commands share: comma lists of names and numbers (``moe plan``, ``moe bench``), the
``--formats`` / ``--mode`` text of ``run`` and ``peak`` (the library takes lists; the text is read here), and the
``--help`` text every command builds (:func:`help_text`)."""

from __future__ import annotations

import re

from truepeak.errors import TruepeakError
from truepeak.formats import get_format


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


def parse_formats(text: str | None) -> list[str] | None:
    """``--formats``: ``"bf16,fp8"`` -> ``["bf16", "fp8_e4m3"]`` (canonical names, :func:`truepeak.formats.get_format`;
    blanks and duplicates dropped); None or nothing -> None (the defaults).

    Raises:
        UnknownNameError: an unknown format; the message lists the known names.
    """
    if text is None:
        return None
    out: list[str] = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        name = get_format(item).name
        if name not in out:
            out.append(name)
    return out or None


def mode_names(text: str | None) -> list[str] | None:
    """``--mode`` as the names given (``"sustained, burst"`` -> ``["sustained", "burst"]``, ``"both"`` -> ``["both"]``),
    each checked (:func:`truepeak.bench.run.config.expand_modes`); None -> None.

    Raises:
        ConfigError: a name other than sustained, burst or both; the message lists the accepted ones.
    """
    if text is None:
        return None
    from truepeak.bench.run.config import expand_modes

    names = [part.strip() for part in str(text).split(",") if part.strip()]
    expand_modes(names)
    return names


def parse_modes(text: str | None) -> list[str]:
    """``--mode``: ``"sustained"`` (default), ``"burst"`` or ``"both"`` (sustained, then burst), or a comma list of
    them, as timing modes in order (:func:`truepeak.bench.run.config.expand_modes`).

    Raises:
        ConfigError: another value; the message lists the accepted ones.
    """
    from truepeak.bench.run.config import expand_modes

    return expand_modes(mode_names(text))


#: Configuration field -> its flag, for the fields the MoE commands (`moe bench`, `moe tune`) share.
FLAG_FOR = {"model": "--model", "tp": "--tp", "ep": "--ep", "tokens_per_expert": "--tokens-per-expert",
            "routing": "--routing", "weights": "--weights", "backends": "--backends",
            "fp8_activations": "--fp8-activations", "fp4_activations": "--fp4-activations",
            "fp4_kernel": "--fp4-kernel", "fp4_layout": "--fp4-layout", "budget_s": "--budget"}


def flag_message(exc: TruepeakError, flags: dict[str, str] | None = None) -> str:
    """``exc``'s message with every field of :data:`FLAG_FOR` written in backticks replaced by its flag; ``flags``
    adds or overrides fields for one command (``moe tune`` spells ``budget_s`` ``--budget-s``)."""
    text = str(exc)
    for name, flag in {**FLAG_FOR, **(flags or {})}.items():
        text = text.replace(f"`{name}`", flag)
    return text



#: Widest line of an example command in ``--help``: rich indents help paragraphs by 3 columns and keeps 1 for the
#: panel's edge, so 74 characters fit an 80-column terminal.
EXAMPLE_WIDTH = 74


def help_text(paragraphs: list[str]) -> str:
    """A command's ``--help`` text: ``paragraphs`` joined by blank lines, with every example (a paragraph that
    starts ``"  truepeak "``) broken into lines of at most :data:`EXAMPLE_WIDTH` characters with shell line
    continuations (`` \\``) between options (an option and its value stay together), the continued lines
    indented, so that at 80 columns rich does not wrap a command in the middle and leave its tail at the left
    margin. A note after the command, set off by four spaces and starting ``(``, goes on its own indented line.
    Quoted arguments stay whole."""
    out = []
    for p in paragraphs:
        if not p.startswith("  truepeak ") or len(p) <= EXAMPLE_WIDTH:
            out.append(p)
            continue
        cmd, sep, note = p.partition("    (")
        tokens = re.findall(r'"[^"]*"|\'[^\']*\'|\S+', cmd)
        words: list[str] = []  # an option and its value stay on one line
        for t in tokens:
            if words and words[-1].startswith("-") and " " not in words[-1] and not t.startswith("-"):
                words[-1] += " " + t
            else:
                words.append(t)
        lines, line = [], "  " + words[0]
        for w in words[1:]:
            if len(line) + 1 + len(w) + 2 > EXAMPLE_WIDTH:  # room for " \"
                lines.append(line + " \\")
                line = "      " + w
            else:
                line += " " + w
        lines.append(line)
        if sep:
            lines.append("      (" + note)
        out.append("\n".join(lines))
    return "\n\n".join(out)


__all__ = ["EXAMPLE_WIDTH", "FLAG_FOR", "comma_items", "flag_message", "help_text", "number_list", "parse_formats",
           "mode_names", "parse_modes"]
