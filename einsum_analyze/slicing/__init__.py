"""Sliced training steps: fix a few indices, run each slice forward then backward, gather.

API (stable; docs/slicing.md has the details and examples):

- :class:`SlicePlan` (frozen): ``indices`` (labels), their ``sizes``, ``chunks`` (chunk
  length per index; the last chunk of an index may be shorter), ``count`` (number of
  slices), ``ranges(k)`` (slice ``k``'s ``(label, start, stop)`` per index; slices are
  numbered row-major, the last index fastest), ``lengths(k)``, ``shapes()`` (slices
  grouped by lengths), ``SlicePlan.of({"n": 2}, size_dict)``, ``SlicePlan.none()``,
  ``SlicePlan.from_dict(result.details["slicing"])`` (a sliced strategy's choice).
- :func:`find_slices` (plan, grad, itemsize=, budget_bytes=, strategy="reverse",
  finder="greedy"|"cotengra"|"auto") -> :class:`SliceChoice`: ``best`` (a
  :class:`SliceScore`: ``slices``, ``peak_bytes`` of the whole step with its full-size
  buffers and inputs, ``forward_flops``, ``backward_flops``, ``flops``, ``copies``),
  ``fits`` (False: nothing fits; ``smallest.peak_bytes`` is the least reachable peak).
- :func:`score_slices` (plan, slices, grad, itemsize=) -> :class:`SliceScore`.
- :func:`sliced_schedule` (plan, slices, grad, itemsize=, strategy=, slice_ids=) ->
  :class:`SlicedSchedule`: the events of the slices ``slice_ids`` (any subset), to lower
  with ``schedule.sizes(equation.size_dict)``.
- :func:`run_slices` (plan, slices, operands, upstream, grad, slice_ids=, strategy=) ->
  (output, gradients): torch tensors on the operands' device; FULL-SIZE output and
  gradients holding the sum over the given slices only, so that summing them over any
  partition of the slices (``all_reduce``) gives the whole step's. Parts of an operand
  that holds a sliced index are written into their place of its gradient; an operand
  without one gets the sum over slices; a sliced output index: each slice writes its
  part of the output and starts its backward from its part of the upstream gradient.

The ``sliced`` strategy itself (:mod:`.strategy`) runs another strategy per slice, so this
package sits above :mod:`einsum_analyze.strategies` and registers ``sliced`` there when it
is imported (``import einsum_analyze`` imports it). It may import the model, the strategies
and, inside :mod:`.run`'s functions, the torch backend.

Analysis modules here never import torch; :mod:`.run` imports it inside its functions.
"""

from __future__ import annotations

from ..strategies.registry import register_strategy
from .finder import FINDERS, MAX_SLICES, SliceChoice, SliceScore, find_slices, score_slices
from .plan import SlicePlan, chunk_labels, slice_equation
from .run import SliceRun, run_slices
from .schedule import (
    PER_SLICE_STRATEGIES,
    SlicedSchedule,
    SliceShape,
    part_is_contiguous,
    sliced_schedule,
)
from .strategy import SPEC as _SLICED

__all__ = [
    "FINDERS",
    "MAX_SLICES",
    "PER_SLICE_STRATEGIES",
    "SliceChoice",
    "SlicePlan",
    "SliceRun",
    "SliceScore",
    "SliceShape",
    "SlicedSchedule",
    "chunk_labels",
    "find_slices",
    "part_is_contiguous",
    "run_slices",
    "score_slices",
    "slice_equation",
    "sliced_schedule",
]

register_strategy(_SLICED)
