"""Shared type aliases and the literal choice sets used across the package."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

Label: TypeAlias = str
"""One index character."""

Term: TypeAlias = str
"""One operand's labels, in order (may repeat a label: ``"ijj"``)."""

Shape: TypeAlias = tuple[int, ...]
SizeDict: TypeAlias = Mapping[Label, int]
LinearPath: TypeAlias = tuple[tuple[int, ...], ...]
"""opt_einsum's linear path: each step names positions in the current operand list."""

SsaPath: TypeAlias = tuple[tuple[int, ...], ...]
"""Single-static-assignment path: every tensor (input or intermediate) has one id."""

DType = Literal["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
Strategy: TypeAlias = str
"""A registered strategy's name (:func:`einsum_analyze.strategies.strategy_names`)."""

DTYPE_ITEMSIZE: Mapping[str, int] = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}
