"""Choose what to slice: the least FLOPs whose step fits a budget (docs/slicing.md).

Every candidate :class:`~.plan.SlicePlan` is scored by our model (:func:`score_slices`):
the sliced step's schedule is lowered and replayed, for one slice of each set of lengths
(every slice starts and ends at the same base, so the step's peak is theirs), and its
FLOPs are those slices' FLOPs times the number of slices like them. The budget bounds the
step's training peak, inputs and full-size buffers included (the report's ``peak_bytes``).

The finders:

- ``greedy`` (ours): from no slicing, while the peak is over the budget, halve the chunk
  of the index whose halving costs the fewest extra FLOPs per byte of peak saved (any
  index of size above 1, output and repeated indices included; the :data:`BEAM` best
  states are kept at each level, not one); once a halving fits,
  take the fitting one of fewest FLOPs and widen its chunk again as far as it still
  fits (bisection). When no halving saves a thousandth of the peak (:data:`MIN_SAVING`)
  it goes on with the halvings of least peak for :data:`LOOKAHEAD` levels; it stops,
  with nothing fitting, after those, or when every halving would pass :data:`MAX_SLICES`.
- ``cotengra``: cotengra's ``SliceFinder`` proposes sets of indices for a few target
  sizes; the greedy search runs on each set alone; the best by our model wins.
- ``auto``: both where cotengra is installed, else greedy.

The default is ``greedy``: importing cotengra adds its optimizers to opt_einsum's, so it
is imported only when asked for (``cotengra``, ``auto``).

When no slicing fits, the result is the least peak found, with ``fits`` false.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..model.deadline import remaining_s
from ..model.lowering import lower_events
from ..model.memory import simulate_memory
from ..model.planning import Plan, size_of
from .plan import SlicePlan
from .schedule import sliced_schedule

__all__ = ["BEAM", "FINDERS", "LOOKAHEAD", "MAX_SLICES", "MIN_SAVING", "SliceChoice", "SliceScore",
           "find_slices", "score_slices"]

FinderName = Literal["auto", "greedy", "cotengra"]
FINDERS: tuple[str, ...] = ("auto", "greedy", "cotengra")

MAX_SLICES = 1024
"""The most slices a step may have: each slice is one pass of the per-slice schedule
(its events, its kernel launches); past a thousand the passes cost more than they save."""


MIN_SAVING = 1000
"""The greedy stops when no halving saves at least 1/MIN_SAVING of the step's peak."""

BEAM = 3
"""States the greedy keeps at each level (the best by extra FLOPs per byte saved)."""

LOOKAHEAD = 3
"""Levels the greedy goes on halving when no halving saves: the first halving of an
index can raise the peak (``ij,jk->ik``: two halves of ``j`` need contiguous copies of
their parts) where further ones lower it below the unsliced peak."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceScore:
    """One slice plan, scored by our model.

    Attributes:
        slices: The plan.
        peak_bytes: The step's training peak, inputs and full-size buffers included.
        forward_flops: FLOPs of the slices' forwards (and the output's additions).
        backward_flops: FLOPs of the slices' backwards (and the gradients' additions).
        copies: Contiguous copies of parts per step.
        copy_bytes: Their bytes, summed over the step.
    """

    slices: SlicePlan
    peak_bytes: int
    forward_flops: int
    backward_flops: int
    copies: int
    copy_bytes: int

    @property
    def flops(self) -> int:
        """Training FLOPs of the step."""
        return self.forward_flops + self.backward_flops


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceChoice:
    """What a finder chose.

    Attributes:
        best: The chosen plan's score.
        fits: Whether its peak is within the budget (None without a budget).
        budget_bytes: The budget.
        finder: Which finder chose it (``greedy``, ``cotengra``, ``given``, ``none``).
        evaluated: Slice plans scored.
        smallest: The least peak found (the best when nothing fits).
    """

    best: SliceScore
    fits: bool | None
    budget_bytes: int | None
    finder: str
    evaluated: int
    smallest: SliceScore


def score_slices(
    plan: Plan,
    slices: SlicePlan,
    grad: Iterable[int],
    *,
    itemsize: int,
    strategy: str = "reverse",
    options: Mapping[str, Any] | None = None,
    fused: bool = True,
    upstream_copy: bool = False,
) -> SliceScore:
    """The step's peak and FLOPs under ``slices`` (see the module).

    ``upstream_copy``: the executor copies the upstream gradient (complex dtypes).
    """
    wanted = tuple(grad)
    groups = slices.shapes()
    representatives = [members[0] for members in groups.values()]
    schedule = sliced_schedule(plan, slices, wanted, itemsize=itemsize, strategy=strategy,
                               options=options, slice_ids=representatives, fused=fused)
    eq = plan.equation
    events = lower_events(schedule.events, eq.terms, schedule.sizes(eq.size_dict))
    memory = simulate_memory(
        events,
        input_elements=sum(size_of(t, eq.size_dict) for t in eq.terms),
        output_elements=size_of(eq.output, eq.size_dict),
        itemsize=itemsize,
        upstream_copy=upstream_copy,
    )
    forward = backward = copies = copy_elements = 0
    for members in groups.values():
        f, b = schedule.slice_flops[members[0]]
        forward += f * len(members)
        backward += b * len(members)
    # Copies: count them on the full step (per slice, from the representatives).
    per_slice = _copies_by_slice(schedule.events)
    for members in groups.values():
        count, elements = per_slice.get(members[0], (0, 0))
        copies += count * len(members)
        copy_elements += elements * len(members)
    return SliceScore(slices=slices, peak_bytes=memory.peak_bytes, forward_flops=forward,
                      backward_flops=backward, copies=copies,
                      copy_bytes=copy_elements * itemsize)


def _copies_by_slice(events: Sequence[Any]) -> dict[int, tuple[int, int]]:
    found: dict[int, tuple[int, int]] = {}
    for event in events:
        if event.kind == "alloc" and event.op == "slice_copy":
            k = int(event.tensor.rpartition("@")[2])
            count, elements = found.get(k, (0, 0))
            found[k] = (count + 1, elements + event.elements)
    return found


class _Scorer:
    """Scores slice plans once each."""

    def __init__(self, plan: Plan, grad: tuple[int, ...], itemsize: int, strategy: str,
                 options: Mapping[str, Any] | None, budget: int | None, fused: bool,
                 upstream_copy: bool) -> None:
        self.fused = fused
        self.upstream_copy = upstream_copy
        self.plan = plan
        self.grad = grad
        self.itemsize = itemsize
        self.strategy = strategy
        self.options = options
        self.budget = budget
        self.seen: dict[SlicePlan, SliceScore] = {}
        self.last_s = 0.0

    def out_of_time(self) -> bool:
        """Whether the search's deadline leaves too little for one more slice plan.

        The chosen plan is built once more after the finder, and its lowering and
        prediction cost about what a scoring does: the finder stops that much sooner.
        """
        left = remaining_s()
        return left is not None and left <= FINAL_BUILDS * self.last_s

    def __call__(self, slices: SlicePlan) -> SliceScore:
        found = self.seen.get(slices)
        if found is None:
            start = time.perf_counter()
            found = score_slices(self.plan, slices, self.grad, itemsize=self.itemsize,
                                 strategy=self.strategy, options=self.options,
                                 fused=self.fused, upstream_copy=self.upstream_copy)
            self.last_s = time.perf_counter() - start
            self.seen[slices] = found
        return found

    def fits(self, score: SliceScore) -> bool:
        return self.budget is None or score.peak_bytes <= self.budget

    def smallest(self) -> SliceScore:
        return min(self.seen.values(), key=lambda s: (s.peak_bytes, s.flops, s.slices.count))


FINAL_BUILDS = 3.0
"""Scorings' worth of time the finder leaves before the deadline: the chosen plan's final
build, lowering and time prediction."""


def _with_chunk(slices: SlicePlan, label: str, size: int, chunk: int) -> SlicePlan:
    chunks = dict(zip(slices.indices, slices.chunks, strict=True))
    chunks[label] = chunk
    sizes = dict(zip(slices.indices, slices.sizes, strict=True))
    sizes[label] = size
    labels = tuple(chunks)
    return SlicePlan(labels, tuple(sizes[c] for c in labels), tuple(chunks[c] for c in labels))


def _greedy(score: _Scorer, labels: Sequence[str], start: SlicePlan,
            max_slices: int, width: int = BEAM) -> SliceScore:
    """The greedy halving (see the module), keeping the ``width`` best states a level.

    Returns the fitting score of fewest FLOPs at the first level where one fits (its
    chunk widened back as far as it still fits), or the least peak reached. When the
    search's deadline comes within :data:`FINAL_BUILDS` scorings
    (:func:`~einsum_analyze.model.deadline.remaining_s`) it scores nothing more and
    returns the best it has.
    """
    sizes = score.plan.equation.size_dict
    frontier = [score(start)]
    if score.fits(frontier[0]):
        return frontier[0]
    least = frontier[0]
    stalled = 0
    while True:
        children: dict[SlicePlan, tuple[SliceScore, str, int, SliceScore]] = {}
        late = False
        for current in frontier:
            chunks = dict(zip(current.slices.indices, current.slices.chunks, strict=True))
            for label in labels:
                if score.out_of_time():
                    late = True
                    break
                old = chunks.get(label, sizes[label])
                new = -(-old // 2)
                if new == old:
                    continue
                trial = _with_chunk(current.slices, label, sizes[label], new)
                if trial.count > max_slices or trial in children:
                    continue
                children[trial] = (score(trial), label, old, current)
        fitting = [c for c in children.values() if score.fits(c[0])]
        if fitting:
            best, label, old, _ = min(fitting, key=lambda c: (c[0].flops, c[0].peak_bytes))
            return best if late else _widen(score, best, label, old)
        if late:
            return min([least, *frontier, *(c[0] for c in children.values())],
                       key=lambda s: (s.peak_bytes, s.flops))
        # A halving must save a thousandth of the peak: past that, more slices only
        # shave the slices' own small tensors off a peak the full-size buffers hold.
        better = [c for c in children.values()
                  if c[3].peak_bytes - c[0].peak_bytes >= max(1, c[3].peak_bytes // MIN_SAVING)]
        least = min([least, *frontier], key=lambda s: (s.peak_bytes, s.flops))
        if not better:
            stalled += 1
            if stalled > LOOKAHEAD or not children:
                return least
            # No halving saves now: go on with those of least peak, a few levels deep.
            ranked_peaks = sorted(children.values(), key=lambda c: (
                c[0].peak_bytes, c[0].flops, c[0].slices.count))
            frontier = [c[0] for c in ranked_peaks[:width]]
            continue
        stalled = 0
        ranked = sorted(better, key=lambda c: (
            (c[0].flops - c[3].flops) / (c[3].peak_bytes - c[0].peak_bytes), c[0].peak_bytes,
            c[0].slices.count))
        frontier = [c[0] for c in ranked[:width]]


def _widen(score: _Scorer, best: SliceScore, label: str, old: int) -> SliceScore:
    """The widest chunk of ``label`` between the fitting one and ``old`` that fits."""
    size = best.slices.sizes[best.slices.indices.index(label)]
    low = best.slices.chunks[best.slices.indices.index(label)]  # fits
    high = old  # does not
    while high - low > 1 and not score.out_of_time():
        middle = (low + high) // 2
        trial = score(_with_chunk(best.slices, label, size, middle))
        if score.fits(trial) and trial.flops <= best.flops:
            low, best = middle, trial
        elif score.fits(trial):
            low = middle
        else:
            high = middle
    return best


def _cotengra_sets(plan: Plan, grad: Sequence[int], budget: int, itemsize: int,
                   peak: int) -> list[tuple[str, ...]]:
    """Index sets cotengra's SliceFinder proposes for a few target sizes."""
    import cotengra as ctg  # type: ignore[import-untyped]

    eq = plan.equation
    ssa: list[tuple[int, ...]] = [step.inputs for step in plan.steps]
    tree = ctg.ContractionTree.from_path(
        [tuple(t) for t in eq.terms], tuple(eq.output), dict(eq.size_dict), ssa_path=ssa
    )
    largest = max(tree.max_size(), 1)
    sets: list[tuple[str, ...]] = []
    ratio = max(peak / max(budget, 1), 1.0)
    for factor in sorted({2, 4, 8, 16, int(2 ** math.ceil(math.log2(ratio)))}):
        target = max(largest // factor, 1)
        try:
            finder = ctg.SliceFinder(tree, target_size=target)
            indices, _ = finder.search()
        except Exception:  # noqa: BLE001 - a proposal cotengra cannot make is no proposal
            continue
        found = tuple(sorted(c for c in indices if eq.size_dict.get(c, 1) > 1))
        if found and found not in sets:
            sets.append(found)
    return sets


def find_slices(
    plan: Plan,
    grad: Iterable[int],
    *,
    itemsize: int,
    budget_bytes: int | None,
    strategy: str = "reverse",
    options: Mapping[str, Any] | None = None,
    finder: str = "greedy",
    max_slices: int = MAX_SLICES,
    fused: bool = True,
    upstream_copy: bool = False,
) -> SliceChoice:
    """The slice plan of fewest FLOPs whose step fits ``budget_bytes`` (see the module).

    Args:
        plan: The unsliced forward plan.
        grad: Operands that need a gradient.
        itemsize: Bytes per element.
        budget_bytes: The training budget, inputs included; None: no slicing.
        strategy: The per-slice strategy.
        options: Its options.
        finder: ``auto``, ``greedy`` or ``cotengra``.
        max_slices: The most slices a plan may have.
        fused: See :func:`~.schedule.sliced_schedule`.
        upstream_copy: The executor copies the upstream gradient (complex dtypes).

    Raises:
        PlanningError: An unknown finder, or cotengra asked for and not installed.
    """
    from ..errors import PlanningError

    if finder not in FINDERS:
        raise PlanningError(f"unknown slice finder {finder!r}; choose one of: "
                            f"{', '.join(FINDERS)}")
    wanted = tuple(sorted(set(grad)))
    score = _Scorer(plan, wanted, itemsize, strategy, options, budget_bytes, fused,
                    upstream_copy)
    unsliced = score(SlicePlan.none())
    if budget_bytes is None or unsliced.peak_bytes <= budget_bytes:
        return SliceChoice(best=unsliced, fits=None if budget_bytes is None else True,
                           budget_bytes=budget_bytes, finder="none", evaluated=1,
                           smallest=unsliced)
    sizes = plan.equation.size_dict
    labels = tuple(c for c in sizes if sizes[c] > 1)
    use_cotengra = finder == "cotengra" or (finder == "auto" and _cotengra_installed())
    if finder == "cotengra" and not _cotengra_installed():
        raise PlanningError("the cotengra slice finder needs the cotengra extra: "
                            "pip install 'einsum-analyze[cotengra]'")
    results: list[tuple[SliceScore, str]] = []
    if finder != "cotengra":
        results.append((_greedy(score, labels, SlicePlan.none(), max_slices), "greedy"))
    if use_cotengra:
        for indices in _cotengra_sets(plan, wanted, budget_bytes, itemsize,
                                      unsliced.peak_bytes):
            if score.out_of_time():
                break
            results.append((_greedy(score, indices, SlicePlan.none(), max_slices),
                            "cotengra"))
    fitting = [(s, name) for s, name in results if score.fits(s)]
    if fitting:
        best, name = min(fitting, key=lambda t: (t[0].flops, t[0].peak_bytes,
                                                  t[0].slices.count))
        return SliceChoice(best=best, fits=True, budget_bytes=budget_bytes, finder=name,
                           evaluated=len(score.seen), smallest=score.smallest())
    smallest = score.smallest()
    return SliceChoice(best=smallest, fits=False, budget_bytes=budget_bytes,
                       finder="greedy" if not use_cotengra else finder,
                       evaluated=len(score.seen), smallest=smallest)


def _cotengra_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("cotengra") is not None
