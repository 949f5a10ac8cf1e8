"""Figures as people read them: bytes, counts and seconds, exact where it helps.

Plain text only, in the bottom layer: the model, the analysis, the drop-in, the
executors, the distributed runs and the renderer share these, so a byte or a second
figure reads the same in an error message, a warning, a table and a budget line. Every function
takes Python integers of any size: nothing here converts a huge integer to a float that
overflows, or to a decimal string longer than the interpreter allows.
"""

from __future__ import annotations

import math

__all__ = ["format_bytes", "format_count", "format_exact_bytes", "format_seconds", "scientific"]

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
SCIENTIFIC_FROM = 10**6
"""Amounts of the largest unit from which scientific notation is used (``1.00e+06 PiB``)."""


def scientific(value: int | float) -> str:
    """A number in scientific notation with three significant figures, for any size.

    Example:
        >>> scientific(3552713678800500729699546371856552525717717575377287643136)
        '3.55e+57'
        >>> scientific(10**5000)
        '1.00e+5000'
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return "inf" if value > 0 else "-inf" if value < 0 else "nan"
        return f"{value:.2e}"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if magnitude < 10**300:
        return f"{sign}{float(magnitude):.2e}"
    exponent = _digits(magnitude) - 1
    lead = magnitude // 10 ** (exponent - 2)  # three leading digits, rounded down
    text = f"{lead:03d}"
    return f"{sign}{text[0]}.{text[1:3]}e+{exponent}"


def _digits(value: int) -> int:
    """Decimal digits of a positive integer, without converting it to text."""
    estimate = max(1, int(value.bit_length() * 0.30102999566398120))
    while 10**estimate <= value:
        estimate += 1
    while estimate > 1 and 10 ** (estimate - 1) > value:
        estimate -= 1
    return estimate


def format_bytes(value: int | float) -> str:
    """Bytes in IEC units for display; scientific notation past a million PiB.

    Example:
        >>> format_bytes(1536)
        '1.50 KiB'
        >>> format_bytes(4 * 10**72)
        '3.55e+57 PiB'
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    if isinstance(value, float):
        amount: int | float = value
    else:
        amount = int(value)
    if abs(amount) < 1024:
        return f"{int(amount)} B"
    for unit in _BYTE_UNITS[1:]:
        # Integers beyond a float's range divide exactly; the rest as floats.
        amount = amount // 1024 if isinstance(amount, int) and abs(amount) >= 2**1000 \
            else amount / 1024
        if abs(amount) < 1024 or unit == "PiB":
            if abs(amount) >= SCIENTIFIC_FROM:
                return f"{scientific(amount)} {unit}"
            return f"{amount:.2f} {unit}"
    raise AssertionError("unreachable")


def format_exact_bytes(value: int) -> str:
    """Bytes exactly, then in IEC units past a KiB, for messages: a budget's figures.

    Example:
        >>> format_exact_bytes(53924), format_exact_bytes(100)
        ('53,924 B (52.66 KiB)', '100 B')
    """
    exact = f"{int(value):,} B"
    return exact if abs(value) < 1024 else f"{exact} ({format_bytes(value)})"


def format_count(value: int) -> str:
    """Counts exact below a million, else in scientific notation: ``10616832 -> '1.06e7'``.

    Example:
        >>> format_count(31112), format_count(10616832)
        ('31,112', '1.06e7')
    """
    if abs(value) < 1_000_000:
        return f"{value:,}"
    mantissa, exponent = scientific(value).split("e")
    return f"{mantissa}e{int(exponent)}"


def format_seconds(value: float) -> str:
    """Seconds in the unit that suits them: ``0.0123 -> '12.3 ms'``.

    Example:
        >>> format_seconds(0.0123)
        '12.3 ms'
    """
    if not math.isfinite(value):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"
