"""What each device sends after its slices: the collectives of a step, planned from sizes.

Every device holds full-size output and gradient buffers, but its slices write only some
parts of them (:mod:`.contract`). A buffer whose labels hold no sliced index gets a
contribution from every slice: it is summed over the devices (``all_reduce``). A buffer
that holds a sliced index is cut into parts, one per chunk combination of its sliced
indices; a part is written by the slices of that combination only:

- a part written on one device alone is final there: the others receive it
  (``broadcast`` from its owner; all of them together are an all-gather of unequal
  parts, with no padding and no temporary);
- a part written on several devices is summed, with the buffers that hold no sliced
  index, in one ``all_reduce``;
- a buffer none of whose parts has a single owner is summed whole, in place.

Small regions travel packed into one contiguous buffer per collective (one call instead
of one per region; the pack is an allocation the memory model counts), large contiguous
ones in place (:data:`IN_PLACE_BYTES`). With ``overlap`` a part's broadcast starts as
soon as its owner has run the last of its slices that write it, while the next slice
runs; the sums wait for the last slice.

Pure: labels, sizes and slice numbers, no torch (:mod:`.collectives` runs a plan).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from ..slicing.plan import SlicePlan
from ..slicing.schedule import part_is_contiguous

__all__ = ["COMMUNICATIONS", "Communication", "CommPlan", "Region", "Transfer",
           "plan_communication"]

Communication = Literal["all-reduce", "gather", "overlap"]
"""How a step's buffers cross between devices: every buffer all-reduced whole (the
first design, kept as the baseline), parts gathered from their owners after the last
slice, or gathered while later slices run."""

COMMUNICATIONS: tuple[str, ...] = get_args(Communication)

OUTPUT = -1
"""The buffer key of the output (operands are keyed by position)."""

IN_PLACE_BYTES = 1 << 20
"""A contiguous region at least this large travels in place, not through a pack."""

FINAL = -1
"""A transfer's round when it waits for every slice."""


@dataclass(frozen=True, slots=True)
class Region:
    """One block of one buffer.

    Attributes:
        buffer: :data:`OUTPUT` or the operand's position.
        index: ``(start, stop)`` of every dimension of the buffer.
        elements: Its elements.
        contiguous: Whether the block is contiguous in the (contiguous) buffer.
    """

    buffer: int
    index: tuple[tuple[int, int], ...]
    elements: int
    contiguous: bool


@dataclass(frozen=True, slots=True)
class Transfer:
    """One collective call of a step.

    Attributes:
        kind: ``"all_reduce"`` (summed over every device) or ``"broadcast"`` (from ``source``).
        source: The broadcasting rank; -1 for a sum.
        regions: What it carries, in pack order.
        packed: Through one fresh contiguous buffer (else one region, in place).
        round: After which of its own slices (by position) each rank issues it;
            :data:`FINAL` after all of them.
    """

    kind: Literal["all_reduce", "broadcast"]
    source: int
    regions: tuple[Region, ...]
    packed: bool
    round: int

    @property
    def elements(self) -> int:
        """Elements carried."""
        return sum(r.elements for r in self.regions)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommPlan:
    """Every collective of a step, in the order every rank issues them.

    Attributes:
        communication: The :data:`Communication` it follows.
        devices: N.
        itemsize: Bytes per element.
        transfers: The calls, in issue order (by round, then as planned).
        buffer_elements: Elements of every buffer, by key (the all-reduce baseline's load).
    """

    communication: str
    devices: int
    itemsize: int
    transfers: tuple[Transfer, ...]
    buffer_elements: Mapping[int, int]

    def received_bytes(self, rank: int) -> int:
        """Bytes ``rank`` receives in a step (ring all-reduce: ``2 (N-1)/N`` of its size)."""
        n = self.devices
        total = 0.0
        for t in self.transfers:
            if t.kind == "all_reduce":
                total += 2 * (n - 1) / n * t.elements
            elif t.source != rank:
                total += t.elements
        return int(round(total * self.itemsize))

    @property
    def moved_bytes(self) -> int:
        """The most any device receives in a step."""
        return max(self.received_bytes(r) for r in range(self.devices))

    @property
    def calls(self) -> int:
        """Collective calls per step."""
        return len(self.transfers)

    def packs(self, rounds: int) -> tuple[tuple[int, ...], ...]:
        """Elements of each pack allocated after each of ``rounds`` slices, then the final ones.

        A rank running ``rounds`` slices issues a transfer of a later round (or of its
        last) after its last slice: with the final ones.
        """
        out: list[list[int]] = [[] for _ in range(rounds + 1)]
        for t in self.transfers:
            if t.packed:
                at = rounds if t.round == FINAL or t.round >= rounds - 1 else t.round
                out[at].append(t.elements)
        return tuple(tuple(per_round) for per_round in out)


def _region(buffer: int, term: str, sizes: Mapping[str, int],
            ranges: Mapping[str, tuple[int, int]]) -> Region:
    index = tuple(ranges.get(c, (0, sizes[c])) for c in term)
    lengths = {c: stop - start for c, (start, stop) in ranges.items() if c in term}
    return Region(buffer, index, math.prod(stop - start for start, stop in index),
                  part_is_contiguous(term, sizes, lengths))


def plan_communication(
    *,
    buffers: Mapping[int, str],
    sizes: Mapping[str, int],
    slices: SlicePlan,
    assignment: Sequence[Sequence[int]],
    itemsize: int,
    communication: str = "gather",
) -> CommPlan:
    """The collectives that give every device the whole output and gradients.

    Args:
        buffers: The labels of every buffer exchanged, by key (:data:`OUTPUT`, operand
            positions).
        sizes: Every label's size.
        slices: The slice plan.
        assignment: Each rank's slices, in the order it runs them.
        itemsize: Bytes per element.
        communication: One of :data:`COMMUNICATIONS`.

    Example:
        ``ij,jk->ik`` with ``j`` cut in 2 on 2 devices: both gradients hold ``j``, each
        part written on one device, so each rank broadcasts its parts; the output
        (``ik``) is summed::

            >>> plan = plan_communication(buffers={-1: "ik", 0: "ij", 1: "jk"},
            ...     sizes={"i": 2, "j": 4, "k": 3}, slices=SlicePlan(("j",), (4,), (2,)),
            ...     assignment=[[0], [1]], itemsize=8)
            >>> [(t.kind, t.source, t.elements) for t in plan.transfers]
            [('broadcast', 0, 10), ('broadcast', 1, 10), ('all_reduce', -1, 6)]
    """
    if communication not in COMMUNICATIONS:
        raise ValueError(f"communication {communication!r}: one of {', '.join(COMMUNICATIONS)}")
    n = len(assignment)
    elements = {key: math.prod(sizes[c] for c in term) for key, term in buffers.items()}
    whole = {key: _region(key, term, sizes, {}) for key, term in buffers.items()}
    if communication == "all-reduce":
        return CommPlan(communication=communication, devices=n, itemsize=itemsize,
                        transfers=tuple(Transfer("all_reduce", -1, (whole[key],), False, FINAL)
                                        for key in buffers),
                        buffer_elements=elements)
    reduced: list[Region] = []
    owned: dict[tuple[int, int], list[Region]] = {}  # (round, rank) -> regions
    for key, term in buffers.items():
        labels = [c for c in slices.indices if c in term]
        if not labels:
            reduced.append(whole[key])
            continue
        writers: dict[tuple[tuple[str, tuple[int, int]], ...], dict[int, int]] = {}
        for rank, part in enumerate(assignment):
            for position, k in enumerate(part):
                ranges = {c: (a, b) for c, a, b in slices.ranges(k) if c in term}
                writers.setdefault(tuple(sorted(ranges.items())), {})[rank] = position
        if all(len(ranks) > 1 for ranks in writers.values()):
            reduced.append(whole[key])
            continue
        for ranges_key, ranks in writers.items():
            region = _region(key, term, sizes, dict(ranges_key))
            if len(ranks) > 1:
                reduced.append(region)
                continue
            ((rank, position),) = ranks.items()
            at = position if communication == "overlap" else FINAL
            owned.setdefault((at, rank), []).append(region)
    transfers: list[Transfer] = []
    last = max((len(p) for p in assignment), default=0)
    for at in [*range(last), FINAL]:
        for rank in range(n):
            transfers.extend(_calls("broadcast", rank, owned.get((at, rank), []), at, itemsize))
    transfers.extend(_calls("all_reduce", -1, reduced, FINAL, itemsize))
    return CommPlan(communication=communication, devices=n, itemsize=itemsize,
                    transfers=tuple(transfers), buffer_elements=elements)


def _calls(kind: Literal["all_reduce", "broadcast"], source: int, regions: Sequence[Region],
           at: int, itemsize: int) -> list[Transfer]:
    """Large contiguous regions in place, one call each; the rest in one pack."""
    if len(regions) == 1 and regions[0].contiguous:
        return [Transfer(kind, source, (regions[0],), False, at)]
    alone = [r for r in regions if r.contiguous and r.elements * itemsize >= IN_PLACE_BYTES]
    rest = tuple(r for r in regions if r not in alone)
    calls = [Transfer(kind, source, (r,), False, at) for r in alone]
    if rest:
        calls.append(Transfer(kind, source, rest, True, at))
    return calls
