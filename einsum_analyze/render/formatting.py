"""Figures as people read them, for the renderer: :mod:`einsum_analyze.model.units`.

The formatters live in the model layer, so that every layer's messages, stderr
included, format seconds and bytes as the tables do; the renderer and the pictures
import them from here.
"""

from __future__ import annotations

from ..model.units import (
    format_bytes,
    format_count,
    format_exact_bytes,
    format_seconds,
    scientific,
)

__all__ = ["format_bytes", "format_count", "format_exact_bytes", "format_seconds", "scientific"]
