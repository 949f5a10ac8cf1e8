"""Compute precision of the runs: float32 in full, with TF32 products, or in bf16 / fp16.

``--precision`` picks one mode for every run of a command:

- ``highest`` (the default): float32 products in float32 (TF32 off);
- ``tf32``: float32 tensors, CUDA matrix products in TensorFloat-32 (a 10-bit mantissa;
  no effect on cpu). Memory figures are those of float32;
- ``bf16`` and ``fp16``: every tensor and product in bfloat16 or float16; the analysis
  and its byte figures use that dtype (the same as ``--dtype bfloat16`` / ``float16``).

Each run's gradient error is measured against the float64 oracle as always, so the
report says what the mode costs in accuracy. The mode is recorded in the report's
``environment.precision``. torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..errors import EinsumAnalyzeError

__all__ = ["PRECISIONS", "describe_precision", "precision_context", "precision_dtype",
           "precision_line"]

PRECISIONS = ("highest", "tf32", "bf16", "fp16")
"""The modes, the default first."""

_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def precision_dtype(mode: str, dtype: str) -> str:
    """The dtype the analysis and the runs use under ``mode``.

    Raises:
        EinsumAnalyzeError: ``mode`` is unknown, or asks for another dtype than float32.

    Example:
        >>> precision_dtype("bf16", "float32"), precision_dtype("tf32", "float32")
        ('bfloat16', 'float32')
    """
    if mode not in PRECISIONS:
        raise EinsumAnalyzeError(
            f"--precision {mode!r}: choose one of {', '.join(PRECISIONS)}")
    if mode == "highest":
        return dtype
    if dtype != "float32":
        raise EinsumAnalyzeError(
            f"--precision {mode} changes how float32 is computed: give it without "
            f"--dtype {dtype}")
    return _DTYPES.get(mode, dtype)


def describe_precision(mode: str, compute_dtype: str) -> dict[str, Any]:
    """What ``environment.precision`` records: the mode, TF32, the compute dtype."""
    return {"mode": mode, "tf32": mode == "tf32", "compute_dtype": compute_dtype}


def precision_line(environment: Mapping[str, Any]) -> str | None:
    """The terminal's line under the runs for a mode other than ``highest``, else None.

    Example:
        >>> precision_line({"precision": describe_precision("bf16", "bfloat16")})[:52]
        'precision bf16: every tensor and product in bfloat16'
    """
    described = environment.get("precision")
    if not isinstance(described, dict) or described.get("mode", "highest") == "highest":
        return None
    how = ("float32 tensors, CUDA matrix products in TF32 (none on cpu)"
           if described.get("tf32")
           else f"every tensor and product in {described.get('compute_dtype')}")
    return f"precision {described['mode']}: {how}; grad err is against the float64 oracle"


@contextmanager
def precision_context(mode: str) -> Iterator[None]:
    """TF32 products on for ``tf32`` and off otherwise, restored on leaving."""
    import torch

    matmul = torch.backends.cuda.matmul
    before = (matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    try:
        yield
    finally:
        matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
