"""What the generated pages share: a block between its markers, paragraphs, a table, and how
each kind of figure is written (dollars, quantities, limits, headrooms, durations)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from costmodel.measurement import DAY, HOUR


def _span(text: str, begin: str, end: str) -> tuple[int, int]:
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"no {begin} ... {end} block")
    return start, stop + len(end)


def block_between(text: str, begin: str, end: str) -> str:
    """The block, its markers included, as its generator writes it (a newline at its end)."""
    start, stop = _span(text, begin, end)
    return text[start:stop] + "\n"


def replace_between(text: str, begin: str, end: str, block: str) -> str:
    """`text` with its block between the markers replaced by `block` (markers included)."""
    start, stop = _span(text, begin, end)
    return text[:start] + block.rstrip("\n") + text[stop:]


def paragraphs(*parts: str | Sequence[str]) -> str:
    """Parts (a paragraph, or a table's or a list's lines) a blank line apart."""
    return "\n\n".join(p if isinstance(p, str) else "\n".join(p) for p in parts)


def block(begin: str, end: str, *parts: str | Sequence[str]) -> str:
    """A generated block: its markers around its parts, a newline at its end."""
    return f"{begin}\n{paragraphs(*parts)}\n{end}\n"


def table(columns: Sequence[str], align: str, rows: Iterable[Sequence[str]]) -> list[str]:
    """A table's lines: its header, its rule (`align`: a letter a column, `l`eft or `r`ight)
    and its rows; an empty cell is written `| |`."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    lines = ("|" + "|".join(f" {cell} " if cell else " " for cell in r) + "|" for r in rows)
    return ["| " + " | ".join(columns) + " |", rule, *lines]


def usd(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:.3f}" if abs(value) < 0.1 else f"${value:,.2f}"


def number(value: float | None, small: str = ".2g") -> str:
    """A load or a limit (None or infinite: no limit); `small`: below 1 (a quantity: `.3g`)."""
    if value is None or math.isinf(value):
        return "unlimited"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:{small}}"


def quantity(value: float) -> str:
    return number(value, ".3g")


def headroom(value: float) -> str:
    """Limit / load; in bold below 1 (saturated)."""
    if math.isinf(value):
        return "-"
    text = f"{value:,.0f}x" if value >= 100 else f"{value:.2g}x"
    return f"**{text}**" if value < 1 else text


def duration(seconds: float) -> str:
    if math.isinf(seconds):
        return "never"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * HOUR:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / HOUR:.1f} h" if seconds < 2 * DAY else f"{seconds / DAY:.1f} days"
