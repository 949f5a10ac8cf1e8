"""Lower each contraction of a schedule to the kernels the executor runs.

Each contraction's kernel comes from :mod:`einsum_analyze.model.kernels`; this module
follows every tensor's memory layout through the schedule, so it knows exactly which
copies happen and how large they are. The memory replay counts them, and the executor
does exactly what the lowering says. The layouts look ahead: a contraction may write
its result in the layout its consumer reads without a copy.

Everything here works on labels and sizes; no arrays.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from .kernels import (
    AboveOne,
    Layout,
    cached_kernel,
    copied_elements,
    lower_contraction,
    lower_to_layout,
    lower_to_layouts,
    readable_orders,
)
from .memo import shared_tables
from .schedule import Event, InputPrep, Kernel

__all__ = [
    "InputPrep", "Kernel", "Layout", "lower_contraction", "lower_events", "lower_to_layout",
]


def lower_events(
    events: Sequence[Event],
    operand_terms: Sequence[str],
    sizes: Mapping[str, int],
    *,
    cache: dict[tuple[tuple[Layout, ...], str], Kernel] | None = None,
    lookahead: bool = True,
) -> tuple[Event, ...]:
    """Attach a :class:`Kernel` and its workspace to every contraction of a schedule.

    The layouts look ahead to each intermediate's consumer: where a product would copy
    an input that an earlier contraction wrote, that contraction writes it in the
    layout the product wants instead (:func:`lower_to_layout`), when that copies less
    (a whole-schedule count of copied elements decides).

    Args:
        events: A schedule (see :mod:`einsum_analyze.model.schedule`).
        operand_terms: The caller's operands' terms (stored contiguously).
        sizes: Size of every label.
        cache: Kernels already chosen, by input layouts and output term, for lowering
            many schedules over the same ``sizes`` (a search does); filled as it goes.
            By default the table that the lowerings of one analysis share
            (:func:`~einsum_analyze.model.memo.shared_table`).
        lookahead: Choose layouts for the consumers (False, or a schedule of more than
            :data:`LOOKAHEAD_EVENTS` events: each contraction's own cheapest kernel,
            the products copying what they need).

    Returns:
        The same events, contractions carrying ``kernel`` and ``workspace``.
    """
    kernels, memo, above, contiguous = shared_tables(sizes, "kernels", "aimed", "above",
                                                     "contiguous")
    cache = kernels if cache is None else cache
    track = lookahead and len(events) <= LOOKAHEAD_EVENTS
    operands = {f"in{k}": _contiguous(term, sizes, contiguous)
                for k, term in enumerate(operand_terms)}
    sources = _sources(events) if track else None
    # Each event's output term, one string object for every pass: its hash is computed
    # once, and the kernel tables' keys compare it by identity.
    outs = [event.equation.partition("->")[2] for event in events]
    # Intermediates the forward pass frees are not kept for backward.
    freed = {e.tensor for e in events if e.kind == "free" and e.phase == "forward"}
    best, wishes, kept = _lower_pass(events, outs, operands, sizes, cache, {}, memo, above,
                                     freed, contiguous, sources=sources)
    if sources is None or not wishes:
        return best
    counted: Counted = {}
    best_copied = _copied(best, sizes, counted)
    current = best
    # A pass is a function of its wishes alone: one given the wishes of an earlier pass
    # gives what that pass gave, which copies no less than the best: the passes stop.
    tried: list[Wishes] = [{}]
    earlier: Earlier = {}
    for _ in range(_PASSES):
        if not wishes or not best_copied:
            break
        wishes = _propagate(current, outs, kept, sources, sizes, wishes, memo, above)
        if wishes in tried:
            break
        tried.append(wishes)
        current, found, kept = _lower_pass(events, outs, operands, sizes, cache, wishes, memo,
                                           above, freed, contiguous, sources=sources, kept=kept,
                                           earlier=earlier)
        copied = _copied(current, sizes, counted)
        if copied >= best_copied:
            break
        best, best_copied = current, copied
        merged = {**wishes, **found}
        if merged == wishes:
            break
        wishes = merged
    return best


LOOKAHEAD_EVENTS = 50_000
"""Longer schedules are lowered without the lookahead: its passes would double the
lowering time of, e.g., the independent strategy's 500,000 events at 500 operands."""

_PASSES = 4
"""Lowerings tried at most beyond the first: each one's wishes come from the last, and
the passes stop at the first that copies no less than the best so far."""

Wishes = dict[int, tuple[tuple[str, ...], ...]]
"""Memory orders in which a product reads a contraction's result without a copy, by the
position of the contraction in the schedule (names are reused once freed)."""

Sources = list[tuple[int | None, ...] | None]
"""For each contraction of a schedule, the positions of the contractions that made its
inputs (None for an input made otherwise: an operand, a view, a seed); None for the other
events. It depends on the schedule alone, so every pass shares it."""


def _sources(events: Sequence[Event]) -> Sources:
    """Each contraction's :data:`Sources`, from the events alone.

    An input's source is the contraction that made it, when that one's layout can be
    aimed (two inputs, not viewed), until the tensor is freed or viewed.
    """
    producer: dict[str, int] = {}
    made_by = producer.get
    sources: Sources = []
    for index, event in enumerate(events):
        op = event.op
        if event.kind == "free" or op != "contract":
            producer.pop(event.tensor, None)
            if op == "view" and event.kind != "free":
                producer.pop(event.inputs[0], None)
            sources.append(None)
            continue
        sources.append(tuple(map(made_by, event.inputs)))
        if len(event.inputs) == 2 and not event.view:
            producer[event.tensor] = index
        else:
            producer.pop(event.tensor, None)
    return sources


Contiguous = dict[str, Layout]
"""Contiguous layouts by term (operands, seeds, zeros), shared by an analysis's lowerings."""


def _contiguous(term: str, sizes: Mapping[str, int], table: Contiguous) -> Layout:
    """``Layout.contiguous(term, sizes)``, through ``table``."""
    found = table.get(term)
    if found is None:
        found = table[term] = Layout.contiguous(term, sizes)
    return found


Earlier = dict[int, list["_Record"]]
"""The records of a lowering's earlier passes that the last pass did not keep, by
position: a pass whose wishes return to those of an earlier one meets the same inputs
and targets again (the passes oscillate), and a record is a function of them."""


Counted = dict[int, tuple[Kernel, int]]
""":func:`copied_elements` of the kernels of one lowering's passes, by the kernel's id
(the entry holds the kernel, so that its id stays its own): a pass keeps most kernels."""

def _copied(events: Sequence[Event], sizes: Mapping[str, int], counted: Counted) -> int:
    """Elements the lowered schedule copies (:func:`copied_elements` of every kernel)."""
    total = 0
    for event in events:
        kernel = event.kernel
        if kernel is None:
            continue
        entry = counted.get(id(kernel))
        if entry is None:
            entry = counted[id(kernel)] = (kernel, copied_elements(kernel, sizes))
        total += entry[1]
    return total


def _propagate(lowered: Sequence[Event], outs: Sequence[str], kept: Kept, sources: Sources,
               sizes: Mapping[str, int], wishes: Wishes, memo: Aimed,
               above: AboveOne) -> Wishes:
    """Wishes passed up the tree: a wished result's inputs wished as it needs them.

    Latest event first, so that a chain of contractions passes its last product's wish
    all the way up in one sweep (a wish goes to an earlier event: a heap of the wished
    positions visits each once, latest first). A contraction takes wishes from its own
    phase only.
    """
    wishes = dict(wishes)
    heap = [-index for index in wishes]
    heapq.heapify(heap)
    while heap:
        index = -heapq.heappop(heap)
        event, record, made = lowered[index], kept[index], sources[index]
        if record is None or made is None or len(record[0]) != 2 or event.view:
            continue
        aimed = _aimed(record[0], outs[index], sizes, wishes[index],
                       memo, above)
        if aimed is None:
            continue
        for position, (source, prep) in enumerate(zip(made, aimed.inputs, strict=True)):
            if (source is not None and prep.copy and not prep.reduce
                    and lowered[source].phase == event.phase):
                if source not in wishes:
                    heapq.heappush(heap, -source)
                wishes[source] = readable_orders(aimed, position)
    return wishes


Aimed = dict[tuple[tuple[Layout, ...], str, tuple[tuple[str, ...], ...]], Kernel | None]
""":func:`_aimed`'s answers over one schedule, by inputs, output and targets (a schedule
of a large network asks the same many times)."""


def _aimed(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int],
    targets: tuple[tuple[str, ...], ...], memo: Aimed, above: AboveOne,
) -> Kernel | None:
    """The kernel writing one of ``targets`` that copies least (None: none can)."""
    key = (tuple(layouts), output, targets)
    found = memo.get(key, _UNSEEN)  # one hash of the key: its layouts are long tuples
    if found is _UNSEEN:
        found = memo[key] = _aim(layouts, output, sizes, targets, above)
    return found


_UNSEEN: Kernel | None = Kernel(kind="einsum", inputs=())
""":func:`_aimed`'s marker of a question not asked yet (None answers "no kernel can")."""


def _aim(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int],
    targets: tuple[tuple[str, ...], ...], above: AboveOne,
) -> Kernel | None:
    best: Kernel | None = None
    best_copied = 0
    for kernel in lower_to_layouts(layouts, output, sizes, targets, above=above):
        if kernel is None:
            continue
        copied = copied_elements(kernel, sizes)
        if best is None or copied < best_copied:
            best, best_copied = kernel, copied
    return best


Kept = list["_Record | None"]
"""What a pass lowered at each position, for the next pass to reuse (None: not kept)."""

_Record = tuple[tuple[Layout, ...], tuple[tuple[str, ...], ...] | None, Event, Layout,
                tuple[tuple[str, Layout], ...], tuple[tuple[int, tuple[tuple[str, ...], ...]], ...]]
"""An event's input layouts and wished targets, then what they gave: the lowered event,
its output's layout, the inputs it promoted to a new layout (forward copies kept), and
the wishes its product makes (:func:`_wishes_of`)."""


def _lower_pass(
    events: Sequence[Event],
    outs: Sequence[str],
    operands: Mapping[str, Layout],
    sizes: Mapping[str, int],
    cache: dict[tuple[tuple[Layout, ...], str], Kernel] | None,
    wishes: Wishes,
    memo: Aimed,
    above: AboveOne,
    freed_in_forward: set[str],
    contiguous: Contiguous,
    *,
    sources: Sources | None = None,
    kept: Kept | None = None,
    earlier: Earlier | None = None,
) -> tuple[tuple[Event, ...], Wishes, Kept]:
    """One lowering of ``events``; the contractions in ``wishes`` aim at those layouts.

    Args:
        events: The schedule.
        outs: Each event's output term.
        operands: The caller's operands' layouts (the same objects every pass).
        sizes: Size of every label.
        cache: Kernels by input layouts and output term.
        wishes: Targets of the contractions aimed at (:data:`Wishes`).
        memo: :func:`_aimed`'s answers.
        above: The kernels' labels of size above 1 by term (:data:`AboveOne`).
        freed_in_forward: The tensors the forward phase frees (not kept for backward).
        contiguous: Contiguous layouts by term (:data:`Contiguous`).
        sources: The schedule's :data:`Sources` when another pass may follow (None:
            only the lowered events).
        kept: The last pass's records: a contraction whose inputs have the very layouts
            and whose wishes are the ones it had then gives what it gave then, so a pass
            redoes only what a changed wish reaches.
        earlier: Records of the passes before the last one (:data:`Earlier`), looked up
            where the last pass's record does not match; filled with the records of
            ``kept`` that this pass replaces.

    Returns the lowered events; for the next pass, the layouts each product copied a
    contraction's result into (the first product's) and the records (:data:`Kept`).
    Without ``sources`` the last two are left empty.
    """
    layouts: dict[str, Layout] = dict(operands)
    layout_of = layouts.__getitem__
    track = sources is not None
    found: Wishes = {}
    lowered: list[Event] = []
    keep = lowered.append
    records: Kept = [None] * len(events) if track else []
    # A schedule may repeat one event object on inputs of the same layouts (the
    # independent strategy's re-rooted cores share their steps): lower it once. The
    # entry holds the key's objects, so that their ids stay theirs.
    done: dict[tuple[object, ...], tuple[Event, Layout, Event, tuple[Layout, ...]]] = {}
    for index, event in enumerate(events):
        if event.kind == "free":
            layouts.pop(event.tensor, None)
            keep(event)
            continue
        op = event.op
        if op == "view":
            layouts[event.tensor] = layouts.pop(event.inputs[0])
            keep(event)
            continue
        if op != "contract":
            old = kept[index] if kept is not None else None
            made = old[3] if old is not None else _contiguous(outs[index], sizes, contiguous)
            if track:
                records[index] = ((), None, event, made, (), ())
            layouts[event.tensor] = made
            keep(event)
            continue
        given = tuple(map(layout_of, event.inputs))
        targets = wishes.get(index)
        old = kept[index] if kept is not None else None
        # The same layouts, as a rule the same objects (a tuple compares those first).
        if old is not None and old[1] == targets and old[0] == given:
            record = old
        elif earlier is not None and (again := _earlier(earlier, index, old, given,
                                                         targets)) is not None:
            record = again
        elif event.phase == "backward":
            key = (id(event), *map(id, given), targets)
            hit = done.get(key)
            if hit is None:
                out_term = outs[index]
                chosen = _chosen(event, given, out_term, sizes, cache, targets, memo, above)
                hit = (_with_kernel(event, chosen), _packed(out_term, chosen.out_order),
                       event, given)
                done[key] = hit
            made_by = sources[index] if sources is not None else None
            record = (given, targets, hit[0], hit[1], (), _wishes_of(hit[0].kernel, made_by))
        else:
            record = _lower_forward(event, outs[index], given, sizes, cache, targets, memo,
                                    above, freed_in_forward,
                                    sources[index] if sources is not None else None)
        for name, layout in record[4]:
            layouts[name] = layout
        layouts[event.tensor] = record[3]
        if track:
            records[index] = record
            for source, orders in record[5]:
                if source not in found:
                    found[source] = orders
        keep(record[2])
    return tuple(lowered), found, records


def _earlier(earlier: Earlier, index: int, old: _Record | None, given: tuple[Layout, ...],
             targets: tuple[tuple[str, ...], ...] | None) -> _Record | None:
    """An earlier pass's record at ``index`` for these inputs and targets (None: none).

    ``old``, the last pass's record there, joins the earlier ones.
    """
    found = None
    past = earlier.get(index)
    if past is not None:
        for record in past:
            if record[1] == targets and record[0] == given:
                found = record
                break
    if old is not None:
        if past is None:
            earlier[index] = [old]
        else:
            past.append(old)
    return found


def _wishes_of(
    kernel: Kernel | None, sources: tuple[int | None, ...] | None,
) -> tuple[tuple[int, tuple[tuple[str, ...], ...]], ...]:
    """The layouts a bmm copies contraction results into, by the contraction's position.

    A pass records each for its contraction unless an earlier product did (the first
    product's wish stands). None ``sources``: no pass follows, no wishes.
    """
    if kernel is None or kernel.kind != "bmm" or sources is None:
        return ()
    (a_source, b_source), (a_prep, b_prep) = sources, kernel.inputs  # a bmm has two inputs
    # Explicit tests rather than a generator: most products copy nothing.
    wished: tuple[tuple[int, tuple[tuple[str, ...], ...]], ...] = ()
    if a_source is not None and a_prep.copy and not a_prep.reduce:
        wished = ((a_source, readable_orders(kernel, 0)),)
    if b_source is not None and b_prep.copy and not b_prep.reduce:
        wished += ((b_source, readable_orders(kernel, 1)),)
    return wished


def _with_kernel(event: Event, kernel: Kernel) -> Event:
    """``event`` with ``kernel`` and its workspace (``_replace``, built directly)."""
    return _NEW(Event, (*event[:_KERNEL], kernel, kernel.workspace, *event[_KERNEL + 2:]))


def _packed(dims: str, memory: Sequence[str]) -> Layout:
    """``Layout.packed(dims, memory)``, built directly."""
    return _NEW(Layout, (dims, tuple(memory), True))


_NEW = tuple.__new__
"""Builds a named tuple from a tuple of all its fields (no call of its ``__new__`` or
``_make``: the lowering builds thousands per pass)."""


_KERNEL = Event._fields.index("kernel")
"""Position of an event's kernel; its workspace follows."""
assert Event._fields[_KERNEL + 1] == "workspace"


def _lower_forward(
    event: Event, out_term: str, given: tuple[Layout, ...], sizes: Mapping[str, int],
    cache: dict[tuple[tuple[Layout, ...], str], Kernel] | None,
    targets: tuple[tuple[str, ...], ...] | None, memo: Aimed, above: AboveOne,
    freed_in_forward: set[str], made_by: tuple[int | None, ...] | None,
) -> _Record:
    """A forward contraction's record: a copy of an input kept for backward is promoted.

    ``made_by``: the contractions that made its inputs (:data:`Sources`; None: no wishes).
    """
    kernel = _chosen(event, given, out_term, sizes, cache, targets, memo, above)
    promoted: tuple[tuple[str, Layout], ...] = ()
    # Only a bmm copies an input; most copy neither (no generator for them).
    if kernel.kind == "bmm" and (kernel.inputs[0].copy or kernel.inputs[1].copy):
        terms = event.equation.partition("->")[0].split(",")
        promote = tuple(
            position
            for position, (name, prep) in enumerate(zip(event.inputs, kernel.inputs, strict=True))
            if prep.copy and name.startswith("x") and name not in freed_in_forward
        )
        if promote:
            kernel = kernel._replace(promote=promote)
        promoted = tuple((event.inputs[position],
                          _packed(terms[position], kernel.inputs[position].copy))
                         for position in promote)
    done_event = _with_kernel(event, kernel)
    return (given, targets, done_event, _packed(out_term, kernel.out_order), promoted,
            _wishes_of(kernel, made_by))


def _chosen(
    event: Event,
    inputs: tuple[Layout, ...],
    out_term: str,
    sizes: Mapping[str, int],
    cache: dict[tuple[tuple[Layout, ...], str], Kernel] | None,
    targets: tuple[tuple[str, ...], ...] | None,
    memo: Aimed,
    above: AboveOne,
) -> Kernel:
    """The event's kernel: a wished output layout when that copies less overall."""
    # cached_kernel's lookup, inline: most records of a pass find their kernel there.
    kernel = cache.get((inputs, out_term)) if cache is not None else None
    if kernel is None:
        kernel = cached_kernel(inputs, out_term, sizes, cache, above)
    if (targets is None or event.view or len(inputs) != 2
            or tuple(kernel.out_order) in targets):
        return kernel
    aimed = _aimed(inputs, out_term, sizes, targets, memo, above)
    # The product that reads the result saves a copy of all of it.
    if aimed is not None and (copied_elements(aimed, sizes)
                              < copied_elements(kernel, sizes) + event.elements):
        return aimed
    return kernel
