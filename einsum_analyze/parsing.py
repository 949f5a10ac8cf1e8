"""Read the small text formats users type: byte sizes, shapes, index sizes, operand lists."""

from __future__ import annotations

import json
import re

from ._types import Shape
from .errors import PlanningError, ShapeError

__all__ = ["parse_bytes", "parse_operand_list", "parse_shapes", "parse_sizes"]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_BYTES = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_DIM = re.compile(r"^[0-9]+$")


def parse_bytes(text: str) -> int:
    """Parse a byte size with an optional SI or IEC unit.

    Args:
        text: e.g. ``"512MiB"``, ``"2GB"``, ``"4096"`` or ``"1.5e9B"``.

    Returns:
        The size in bytes, rounded down.

    Raises:
        ValueError: The text is not a size, or its unit is unknown.

    Example:
        >>> parse_bytes("1.5KiB")
        1536
    """
    match = _BYTES.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a byte size such as 512MiB or 2GB")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"unknown unit {unit!r} in {text!r}; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
        )
    if number.isdigit():
        return int(number) * factor
    value = float(number) * factor
    if value == float("inf"):
        raise ValueError(f"{text!r} is too large a byte size")
    return int(value)


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """Parse operand shapes: ``"512x2,2x7,()"`` or the JSON form ``"[[512,2],[2,7],[]]"``.

    Raises:
        ShapeError: The text is neither form, or a size is not a whole number.

    Example:
        >>> parse_shapes("2x3,3,()")
        ((2, 3), (3,), ())
    """
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise ShapeError(
                f"--shapes is not valid JSON: {err.msg} at column {err.colno}"
            ) from err
        if not isinstance(data, list) or not all(isinstance(s, list) for s in data):
            raise ShapeError("--shapes JSON must be a list of lists, e.g. [[512,2],[2,7],[]]")
        shapes = []
        for number, shape in enumerate(data):
            for dim in shape:
                if isinstance(dim, bool) or not isinstance(dim, int):
                    raise ShapeError(
                        f"--shapes operand {number} has size {dim!r}; sizes are whole numbers"
                    )
            shapes.append(tuple(shape))
        return tuple(shapes)
    if not stripped:
        raise ShapeError("--shapes is empty; give one AxBxC item per operand, () for a scalar")
    shapes = []
    for number, item in enumerate(stripped.split(",")):
        item = item.strip()
        if item in ("()", ""):
            if item == "":
                raise ShapeError(
                    f"--shapes item {number} is empty; write () for a scalar operand"
                )
            shapes.append(())
            continue
        dims = item.lower().split("x")
        if not all(_DIM.match(d) for d in dims):
            raise ShapeError(
                f"--shapes item {number} {item!r} is not of the form AxBxC with whole numbers"
            )
        shapes.append(tuple(int(d) for d in dims))
    return tuple(shapes)


def parse_sizes(text: str) -> dict[str, int]:
    """Parse index sizes: ``"b=512,c=2"``.

    Raises:
        ShapeError: An item is not ``label=size`` or a label repeats.

    Example:
        >>> parse_sizes("a=2, b=3")
        {'a': 2, 'b': 3}
    """
    sizes: dict[str, int] = {}
    for item in text.split(","):
        label, sep, value = item.strip().partition("=")
        label, value = label.strip(), value.strip()
        if not sep or len(label) != 1 or not label.isalpha() or not _DIM.match(value):
            raise ShapeError(f"--sizes item {item.strip()!r} is not of the form label=size")
        if label in sizes:
            raise ShapeError(f"--sizes gives index {label!r} twice")
        sizes[label] = int(value)
    return sizes


def parse_operand_list(text: str, num_operands: int) -> tuple[int, ...]:
    """Parse operand positions: ``"all"``, ``"none"``, ``"0,3"``, ``"9-17"`` or a mix.

    Returns:
        Sorted distinct positions.

    Raises:
        PlanningError: Unreadable text or a position outside the operands.

    Example:
        >>> parse_operand_list("0,2-3", 5)
        (0, 2, 3)
    """
    stripped = text.strip().lower()
    if stripped == "all":
        return tuple(range(num_operands))
    if stripped == "none":
        return ()
    positions: set[int] = set()
    for item in stripped.split(","):
        first, sep, last = item.strip().partition("-")
        if not _DIM.match(first) or (sep and not _DIM.match(last)):
            raise PlanningError(
                f"operand list item {item.strip()!r} is not a position or a range like 9-17"
            )
        low, high = int(first), int(last) if sep else int(first)
        if low > high:
            raise PlanningError(f"operand range {item.strip()!r} runs backwards")
        if high >= num_operands:
            raise PlanningError(
                f"operand {high} does not exist; the equation has operands 0..{num_operands - 1}"
            )
        positions.update(range(low, high + 1))
    return tuple(sorted(positions))
