"""Products that run as a few multiply-adds instead of one batched matrix product.

A batched matrix-vector product that sums very few elements is far from its memory
bound as a BLAS call: on ``tn18-b65536-bond64`` the forward step
``kjihdefgzb,bd->kjihefgzb`` (65,536 products of a 1,280 x 2 matrix by a 2-vector)
took 0.957 ms as ``torch.bmm`` on the H200, against a bound of 0.268 ms, and the chain
of such steps was 80% of the forward (docs/results/gpu_2026-12-02e). The same product
as ``k`` broadcast multiply-adds into its output (``torch.mul`` then ``addcmul_``)
reads each input once and writes the output ``k`` times: elementwise kernels that run
at the device's bandwidth. It allocates the same one output, so the memory model does
not change; the time model prices its traffic (:mod:`einsum_analyze.roofline.steps`)
and the executor runs it (:mod:`einsum_analyze.backends.torch_contract`).

Analysis only: labels and sizes, no arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .schedule import Kernel

__all__ = ["NARROW_ELEMENTS", "NARROW_ITEMSIZE", "NARROW_SUMMED", "narrow_terms",
           "vector_product"]

NARROW_SUMMED = 4
"""The most elements a narrow product sums per output element."""

NARROW_ELEMENTS = 1 << 20
"""The fewest output elements of a narrow product. The multiply-adds save about 1.8 times
the step's memory bound on the H200 (the product at 3.5x it, the multiply-adds near 1.7x)
and cost ``k - 1`` more launches, about 5 us each from the host: the saving passes a
launch at about 13 MB moved, a million float32 outputs when two elements are summed.
Below it (``tn18-b512``'s steps, a host-bound chain) one product is cheaper."""

NARROW_ITEMSIZE = 4
"""The smallest element size (bytes) run as multiply-adds: a half-precision product
accumulates in float32, and ``addcmul_`` would not."""


def narrow_terms(kernel: Kernel, sizes: Mapping[str, int], itemsize: int | None = None) -> int:
    """The multiply-adds ``kernel`` runs as, or 0 where it runs as one matrix product.

    A ``bmm`` kernel whose left or right side is a vector (its labels multiply to 1),
    summing 2 to :data:`NARROW_SUMMED` elements per output element, with at least
    :data:`NARROW_ELEMENTS` outputs and no promoted input; with ``itemsize`` given, also
    an element of at least :data:`NARROW_ITEMSIZE` bytes (the executor checks the dtype
    when it runs).

    Example:
        >>> k = Kernel(kind="bmm", inputs=(), batch=("b",), left=("m",), contracted=("d",),
        ...            right=(), out_order=("b", "m"))
        >>> narrow_terms(k, {"b": 8192, "m": 128, "d": 2}, 4)
        2
        >>> narrow_terms(k, {"b": 8192, "m": 128, "d": 2}, 2)  # float16: one product
        0
        >>> narrow_terms(k, {"b": 512, "m": 128, "d": 2}, 4)  # 65,536 outputs: one product
        0
    """
    if kernel.kind != "bmm" or kernel.promote:
        return 0
    if itemsize is not None and itemsize < NARROW_ITEMSIZE:
        return 0
    summed = math.prod(sizes[c] for c in kernel.contracted)
    left = math.prod(sizes[c] for c in kernel.left)
    right = math.prod(sizes[c] for c in kernel.right)
    if not vector_product(summed, left, right):
        return 0
    if math.prod(sizes[c] for c in kernel.batch) * left * right < NARROW_ELEMENTS:
        return 0
    return summed


def vector_product(summed: int, left: int, right: int) -> bool:
    """Whether a product of these sides is a matrix-vector one summing 2 to 4 elements.

    ``summed``, ``left`` and ``right``: the elements of its contracted, left and right
    labels. The narrow shape, whatever its size and dtype.
    """
    return 2 <= summed <= NARROW_SUMMED and min(left, right) == 1
