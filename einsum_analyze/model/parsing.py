"""User text to values, in one place: what users type on the command line or in files.

Byte sizes, shapes, index sizes, operand lists, strategy names, memory limits and budget
figures. Each parser takes text (or the value a JSON or TOML file holds) and returns a
plain value, or raises one :class:`EinsumAnalyzeError` subclass with a one-line message.
Nothing here knows about reports or runs; this module sits below everything but
:mod:`einsum_analyze.errors` and :mod:`einsum_analyze.model.types`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import BudgetError, InputFileError, PlanningError, ShapeError
from .types import Shape

if TYPE_CHECKING:
    from .equation import Equation

__all__ = [
    "parse_budget_strategy",
    "parse_byte_budget",
    "parse_bytes",
    "parse_count",
    "parse_memory_limit",
    "parse_operand_list",
    "parse_seconds",
    "parse_shapes",
    "parse_sizes",
    "parse_strategy_names",
    "shapes_from_value",
    "sizes_from_value",
]

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
_NUMBER = re.compile(r"^\s*([0-9][0-9_]*\.?[0-9_]*(?:[eE][+-]?[0-9]+)?)\s*$")
_SECONDS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(s|ms|us|ns)?\s*$")
_SECOND_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
MAX_DIGITS = 1000
"""Whole numbers typed with more digits than this are refused: no einsum needs them, and
Python refuses to convert more than 4,300 digits at all."""


def _whole(text: str, what: str, error: type[Exception] = ShapeError) -> int:
    """A whole number typed as decimal digits; too many digits raise ``error``."""
    digits = text.strip().replace("_", "").lstrip("0")
    if len(digits) > MAX_DIGITS:
        raise error(f"{what} has {len(digits):,} digits; at most {MAX_DIGITS:,} are read")
    return int(text)


def _load_json(text: str) -> object:
    """``json.loads``, with nesting too deep to read raised as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError as err:
        raise ValueError("JSON nested too deeply to read") from err


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
        return _whole(number, "a byte size", ValueError) * factor
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
            data = _load_json(stripped)
        except json.JSONDecodeError as err:
            raise ShapeError(
                f"--shapes is not valid JSON: {err.msg} at column {err.colno}"
            ) from err
        except ValueError as err:
            raise ShapeError(f"--shapes is not readable JSON: {err}") from err
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
        shapes.append(tuple(_whole(d, f"--shapes item {number}") for d in dims))
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
        if not sep or len(label) != 1 or not _is_label(label) or not _DIM.match(value):
            raise ShapeError(f"--sizes item {item.strip()!r} is not of the form label=size")
        if label in sizes:
            raise ShapeError(f"--sizes gives index {label!r} twice")
        sizes[label] = _whole(value, f"--sizes index {label!r}")
    return sizes


def _is_label(char: str) -> bool:
    """Whether ``char`` may name an index: a letter, an ASCII digit (as in ``a0,0b->ab``)."""
    return char.isalpha() or char in "0123456789"


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
        low = _whole(first, "operand position", PlanningError)
        high = _whole(last, "operand position", PlanningError) if sep else low
        if low > high:
            raise PlanningError(f"operand range {item.strip()!r} runs backwards")
        if high >= num_operands:
            raise PlanningError(
                f"operand {high} does not exist; the equation has operands 0..{num_operands - 1}"
            )
        positions.update(range(low, high + 1))
    return tuple(sorted(positions))


def shapes_from_value(value: object, where: str) -> tuple[Shape, ...]:
    """Read shapes as a cases file holds them: text (see :func:`parse_shapes`) or lists.

    Args:
        value: ``"2x3,3x4"`` or ``[[2, 3], [3, 4]]``.
        where: What holds the shapes, for error messages, e.g. ``"case 'mm'"``.

    Raises:
        ShapeError: Neither form, or a size that is not a whole number.

    Example:
        >>> shapes_from_value([[2, 3], []], "case 'mm'")
        ((2, 3), ())
    """
    if isinstance(value, str):
        return parse_shapes(value)
    if not isinstance(value, list) or not all(isinstance(shape, list) for shape in value):
        raise ShapeError(f"{where} shapes must be a list of lists or text like 2x3,3x4")
    shapes: list[Shape] = []
    for number, shape in enumerate(value):
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise ShapeError(
                    f"{where} operand {number} has size {dim!r}; sizes are whole numbers"
                )
        shapes.append(tuple(shape))
    return tuple(shapes)


def sizes_from_value(value: object, where: str) -> dict[str, int]:
    """Read index sizes as a cases file holds them: text (see :func:`parse_sizes`) or a table.

    Raises:
        ShapeError: Neither form, a label that is not one letter, or a size that is not a
            whole number.

    Example:
        >>> sizes_from_value({"a": 2, "b": 3}, "case 'mm'")
        {'a': 2, 'b': 3}
    """
    if isinstance(value, str):
        return parse_sizes(value)
    if not isinstance(value, dict):
        raise ShapeError(f"{where} sizes must be a table like {{a = 2}} or text a=2,b=3")
    sizes: dict[str, int] = {}
    for label, size in value.items():
        if len(label) != 1 or not _is_label(label):
            raise ShapeError(f"{where} sizes has {label!r}; an index is one letter or digit")
        if isinstance(size, bool) or not isinstance(size, int):
            raise ShapeError(
                f"{where} gives index {label!r} size {size!r}; sizes are whole numbers"
            )
        sizes[label] = size
    return sizes


def parse_strategy_names(value: object, where: str = "--strategy") -> tuple[str, ...]:
    """Read backward strategy names: ``"reverse,independent"``, a list, or ``"none"``.

    Names are stripped and lower-cased; they are checked against the registered
    strategies later, by the analysis. ``"none"`` (or nothing) means forward only.

    Args:
        value: Comma-separated text, or a list of names (from a cases file).
        where: What holds the names, for the error message.

    Raises:
        InputFileError: Neither text nor a list of names.

    Example:
        >>> parse_strategy_names(" Reverse, torch-autograd ")
        ('reverse', 'torch-autograd')
        >>> parse_strategy_names("none")
        ()
    """
    if isinstance(value, str):
        names = [name.strip().lower() for name in value.split(",") if name.strip()]
    elif isinstance(value, list) and all(isinstance(name, str) for name in value):
        names = [name.strip().lower() for name in value]
    else:
        raise InputFileError(f"{where} strategy is {value!r}; expected names such as "
                             "'reverse,independent' or a list")
    return () if names in ([], ["none"]) else tuple(names)


def parse_memory_limit(
    limit: int | str | None, equation: Equation, itemsize: int
) -> int | None:
    """Turn a user's memory limit into opt_einsum's element count.

    Args:
        limit: ``None``, an element count, ``"max_input"`` (the largest input or output, as
            opt_einsum means it), or a byte size such as ``"512MiB"`` or ``"2GB"``.
        equation: The equation, for ``max_input``.
        itemsize: Bytes per element, to turn a byte size into elements.

    Returns:
        The limit in elements, or ``None`` for no limit.

    Raises:
        PlanningError: An unreadable or non-positive limit.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ab,bc->ac", [(2, 3), (3, 4)])
        >>> parse_memory_limit("1KiB", eq, 4)
        256
    """
    if limit is None:
        return None
    if isinstance(limit, int) and not isinstance(limit, bool):
        if limit < 1:
            raise PlanningError(f"memory limit {limit} must be a positive number of elements")
        return limit
    if limit == "max_input":
        sizes = equation.size_dict
        terms = (*equation.terms, equation.output)
        return max(math.prod([sizes[label] for label in term]) for term in terms)
    if isinstance(limit, str):
        try:
            if not any(char.isalpha() for char in limit.lower().replace("e", "")):
                # No unit: an element count, as opt_einsum means it ("1e6" included).
                elements = parse_bytes(limit)
            else:
                elements = parse_bytes(limit) // itemsize
        except ValueError as err:
            raise PlanningError(f"memory limit {limit!r}: {err}") from err
        if elements < 1:
            raise PlanningError(f"memory limit {limit!r} is less than one element")
        return elements
    raise PlanningError(f"memory limit {limit!r} is not an element count or a byte size")


def parse_count(value: object, name: str = "budget") -> int:
    """Read a FLOP budget: a whole number, possibly in scientific notation.

    Args:
        value: An int, an integral float, or text such as ``"1e9"`` or ``"2_000_000"``.
        name: The budget's name, for the error message.

    Returns:
        The count.

    Raises:
        BudgetError: Not a whole non-negative number.

    Example:
        >>> parse_count("1.5e3")
        1500
    """
    number: float | int
    if isinstance(value, bool):
        raise BudgetError(f"{name} is {value!r}; expected a whole number such as 1e9")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = value
    elif isinstance(value, str) and _NUMBER.match(value):
        text = value.strip().replace("_", "")
        number = _whole(text, name, BudgetError) if text.isdigit() else float(text)
    else:
        raise BudgetError(f"{name} is {value!r}; expected a whole number such as 1e9")
    if isinstance(number, float):
        if not math.isfinite(number) or number != int(number):
            raise BudgetError(f"{name} is {value!r}; expected a whole number such as 1e9")
        number = int(number)
    if number < 0:
        raise BudgetError(f"{name} is {value!r}; expected a number of at least 0")
    return number


def parse_seconds(value: object, name: str = "max-time") -> float:
    """Read a time budget in seconds: a number, or text with a unit (s, ms, us, ns).

    Raises:
        BudgetError: Not a non-negative duration.

    Example:
        >>> parse_seconds("250ms")
        0.25
    """
    if isinstance(value, bool):
        raise BudgetError(f"{name} is {value!r}; expected seconds such as 0.5 or 250ms")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _SECONDS.match(value)):
        number, unit = match.groups()
        seconds = float(number) * _SECOND_UNITS[unit or "s"]
    else:
        raise BudgetError(f"{name} is {value!r}; expected seconds such as 0.5 or 250ms")
    if not math.isfinite(seconds) or seconds < 0:
        raise BudgetError(f"{name} is {value!r}; expected a duration of at least 0 s")
    return seconds


def parse_byte_budget(value: object, name: str) -> int:
    """Read a byte budget: a whole number of bytes, or text such as ``"512MiB"``.

    Raises:
        BudgetError: Not a non-negative size.

    Example:
        >>> parse_byte_budget("2KiB", "max-peak")
        2048
    """
    if isinstance(value, bool):
        raise BudgetError(f"{name} is {value!r}; expected bytes such as 512MiB or 2GB")
    if isinstance(value, int):
        if value < 0:
            raise BudgetError(f"{name} is {value!r}; expected a size of at least 0 B")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        try:
            return parse_bytes(value)
        except ValueError as err:
            raise BudgetError(f"{name}: {err}") from err
    raise BudgetError(f"{name} is {value!r}; expected bytes such as 512MiB or 2GB")


def parse_budget_strategy(value: object, strategies: Sequence[str]) -> str:
    """Read the budget strategy: ``"all"`` or one of ``strategies``, any case.

    Raises:
        BudgetError: Not text, or not ``all`` nor a strategy name.

    Example:
        >>> parse_budget_strategy(" Reverse", ("reverse", "independent"))
        'reverse'
    """
    if not isinstance(value, str):
        raise BudgetError(f"budget-strategy is {value!r}; expected a strategy name or 'all'")
    name = value.strip().lower()
    if name != "all" and name not in strategies:
        raise BudgetError(
            f"unknown budget strategy {value!r}; choose all or one of: {', '.join(strategies)}"
        )
    return name
