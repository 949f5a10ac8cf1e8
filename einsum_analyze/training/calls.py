"""How the drop-in reads a call as torch.einsum reads it, and what torch.einsum itself does.

:func:`read_call` accepts every call form of ``torch.einsum``: an equation and its
operands (separately, or as one list or tuple), and the sublist format
``einsum(x, [0, 1], y, [1, 2], [0, 2])`` with ``Ellipsis`` and an optional output
sublist (labels 0 to 25 are ``A`` to ``Z``, 26 to 51 are ``a`` to ``z``, as torch maps
them). Whatever it cannot read (too few arguments, a label out of range, a Python scalar
where a tensor belongs) it leaves to torch.einsum, which raises its own exception.

:func:`torch_layout` asks torch.einsum, on the ``meta`` device (no data, no device
memory), what it does with a call's equation and shapes: the shape and strides of its
result, or the exception it raises, re-raised as one line of the same type (a
:class:`~einsum_analyze.errors.DropinError`, which is a RuntimeError, or a
:class:`~einsum_analyze.errors.DropinValueError`). The plan cache asks it before it
plans anything, so that a call torch refuses is refused the same way and leaves nothing
cached.

:func:`check_options` checks the options only the drop-in takes (``strategy``,
``budget``, ``optimize``), once per distinct set; :func:`budget_bytes` reads the budget.
:func:`strided_layout` asks torch.einsum the same question for non-contiguous operands.

It imports torch, and keeps torch's own einsum (:data:`TORCH_EINSUM`) from before
any :func:`einsum_analyze.torch.patch`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.functional

from ..errors import DropinError, DropinValueError, EinsumAnalyzeError

__all__ = ["TORCH_EINSUM", "budget_bytes", "check_options", "may_overlap", "read_call",
           "same_layout", "strided_layout", "torch_layout"]

Layout = tuple[tuple[int, ...], tuple[int, ...]]


TORCH_EINSUM: Callable[..., Any] = torch.functional.einsum
"""torch.einsum as torch defines it, kept before any :func:`einsum_analyze.torch.patch`
replaces ``torch.einsum``: what the drop-in falls back to."""

_LETTERS = 26


def _sublist_label(value: Any) -> str | None:
    """The equation text of one sublist entry, as torch maps it; None if torch refuses it."""
    if value is Ellipsis:
        return "..."
    if type(value) is not int or not 0 <= value < 2 * _LETTERS:
        return None
    return chr(ord("A") + value) if value < _LETTERS else chr(ord("a") + value - _LETTERS)


def _sublist_term(sublist: Any) -> str | None:
    if not isinstance(sublist, (list, tuple)):
        return None
    labels = [_sublist_label(value) for value in sublist]
    if any(label is None for label in labels):
        return None
    return "".join(labels)  # type: ignore[arg-type]


def read_call(args: Sequence[Any]) -> tuple[str, tuple[Any, ...]] | None:
    """The equation and operands of a ``torch.einsum(*args)`` call; None: leave it to torch.

    Operands are returned as given (tensors or not); the caller checks them.

    Example:
        >>> import torch
        >>> x = torch.ones(2, 3)
        >>> read_call([x, [0, Ellipsis], x, [1, Ellipsis], [0, 1]])[0]
        'A...,B...->AB'
        >>> read_call(["ij->ji", [x]])[0]
        'ij->ji'
        >>> read_call(["", []]) is None  # torch raises its own ValueError
        True
    """
    if len(args) < 2:
        return None
    first = args[0]
    if isinstance(first, torch.Tensor):
        terms = [_sublist_term(sublist) for sublist in args[1::2]]
        if any(term is None for term in terms):
            return None
        equation = ",".join(terms)  # type: ignore[arg-type]
        operands = tuple(args[:-1:2]) if len(args) % 2 else tuple(args[::2])
        if len(args) % 2:
            output = _sublist_term(args[-1])
            if output is None:
                return None
            equation += "->" + output
        return equation, operands
    if not isinstance(first, str):
        return None
    operands = tuple(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        return None
    return first, operands


def torch_layout(equation: str, shapes: Sequence[Sequence[int]], dtype: str) -> Layout:
    """Shape and strides of torch.einsum's result for contiguous operands of ``shapes``.

    Raises:
        DropinError: torch.einsum raises a RuntimeError (or anything but a ValueError)
            for this call: its message's first line.
        DropinValueError: torch.einsum raises a ValueError.
    """
    operands = [torch.empty(tuple(shape), dtype=getattr(torch, dtype), device="meta")
                for shape in shapes]
    try:
        with torch._C.DisableTorchFunction():  # a question, not a call: no mode sees it
            result = TORCH_EINSUM(equation, *operands)
    except ValueError as err:
        raise DropinValueError(_one_line(err)) from None
    except (RuntimeError, TypeError, IndexError) as err:
        raise DropinError(_one_line(err)) from None
    return tuple(result.shape), tuple(result.stride())


@functools.lru_cache(maxsize=256)
def strided_layout(equation: str, shapes: tuple[tuple[int, ...], ...],
                   strides: tuple[tuple[int, ...], ...], dtype: torch.dtype) -> Layout:
    """Shape and strides of torch.einsum's result for operands of ``shapes`` and ``strides``.

    torch.einsum's result follows its operands' strides where it returns a view of one
    or an elementwise product (``ij->ji`` of a transposed operand is contiguous); asked
    on the ``meta`` device for calls whose operands are not contiguous. Only calls
    :func:`torch_layout` accepted come here.
    """
    operands = [torch.empty_strided(shape, stride, dtype=dtype, device="meta")
                for shape, stride in zip(shapes, strides, strict=True)]
    with torch._C.DisableTorchFunction():
        result = TORCH_EINSUM(equation, *operands)
    return tuple(result.shape), tuple(result.stride())


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    message = text[0] if text else type(err).__name__
    return message if message.startswith("einsum") else f"einsum(): {message}"


def same_layout(shape: Sequence[int], strides: Sequence[int], other: Sequence[int]) -> bool:
    """Whether two strides of ``shape`` lay the elements out alike.

    Dimensions of size 1 take any stride, and an empty tensor has no layout.

    Example:
        >>> same_layout((2, 1, 3), (3, 1, 1), (3, 7, 1))
        True
        >>> same_layout((2, 3), (3, 1), (1, 2))
        False
    """
    if 0 in shape:
        return True
    return all(size == 1 or a == b for size, a, b in zip(shape, strides, other, strict=True))


def may_overlap(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether two elements of a tensor of ``shape`` and ``strides`` may share an address.

    True for a stride 0 (an expanded dimension) and for any layout whose dimensions,
    smallest stride first, do not each step past all the smaller ones (conservative:
    a few interleaved layouts that do not overlap say True too).

    Example:
        >>> may_overlap((3, 4), (0, 1)), may_overlap((3, 4), (1, 3)), may_overlap((0, 2), (0, 0))
        (True, False, False)
    """
    if 0 in shape:
        return False
    reach = 0  # the largest offset the dimensions of smaller strides reach
    for stride, size in sorted((abs(st), n) for n, st in zip(shape, strides, strict=True)
                               if n > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


_CHECKED: set[tuple[Any, ...]] = set()
_CHECKED_LOCK = threading.Lock()


def check_options(strategy: Any, budget: Any, optimize: Any) -> None:
    """Check the drop-in's own options; a set once found good is not checked again.

    Raises:
        DropinValueError: One line naming the bad option and what it accepts.
    """
    key = (type(strategy), strategy, type(budget), budget, type(optimize), optimize)
    try:
        if key in _CHECKED:
            return
    except TypeError:  # unhashable: a list, a dict, ...
        pass
    from ..model.planning import OPTIMIZERS
    from ..strategies import get_strategy, strategy_names

    if not isinstance(strategy, str):
        raise DropinValueError(f"einsum(): strategy={strategy!r} is not a strategy name; use "
                               f"'auto' or one of: {', '.join(strategy_names())}")
    if strategy != "auto":
        try:
            get_strategy(strategy)
        except EinsumAnalyzeError as err:
            raise DropinValueError(f"einsum(): {err}") from None
    if not isinstance(optimize, str) or optimize.lower() not in OPTIMIZERS:
        raise DropinValueError(f"einsum(): optimize={optimize!r} is not an optimizer; use one "
                               f"of: {', '.join(OPTIMIZERS)}")
    if budget is not None and not isinstance(budget, (int, str)):
        raise DropinValueError(f"einsum(): budget={budget!r} is not a size; give bytes (an int) "
                               "or text such as '512MiB'")
    if budget is not None:
        budget_bytes(budget)
    with _CHECKED_LOCK:
        if len(_CHECKED) > 1024:
            _CHECKED.clear()
        _CHECKED.add(key)


def budget_bytes(budget: int | str) -> int:
    """The ``budget`` option in bytes, at most 2**63 - 1.

    The ops take it as a 64-bit integer; no peak reaches that bound.

    Raises:
        DropinValueError: One line: not a size, or not above 0 B (0 must not read as
            "no budget").
    """
    from ..model.parsing import parse_byte_budget

    try:
        value = parse_byte_budget(budget, "budget")
    except EinsumAnalyzeError as err:  # a BudgetError: one line
        raise DropinValueError(f"einsum(): {err}") from None
    if value < 1:  # as analyze(budget=) says
        raise DropinValueError(f"einsum(): budget {budget!r} must be a size above 0 B, such "
                               "as 512MiB")
    return min(value, _INT64_MAX)


_INT64_MAX = 2**63 - 1
