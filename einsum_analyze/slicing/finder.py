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

Under the search's deadline (:mod:`einsum_analyze.model.deadline`) the finder leaves time
for the chosen plan's final build: the whole schedule, every slice's events, lowered,
replayed and its time predicted, linear in its events (10 to 25 us an event on a 2-core
CPU: 0.4 to 3.4 ms a slice at 1,024 slices). Each score counts the whole schedule's
events (:attr:`SliceScore.events`, from one slice of each set of lengths), and the
scorings measure the seconds per event (their median over the scorings so far); the
finder stops before the next scoring would leave less than that plan's build (and
:data:`FINAL_BUILDS` scorings), and it returns only a plan whose build fits the time
left: where the best found would not, the best whose build fits (fewer slices).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..model.deadline import now, remaining_s
from ..model.lowering import lower_events
from ..model.memory import simulate_memory
from ..model.planning import Plan, size_of
from .plan import SlicePlan
from .schedule import sliced_schedule

__all__ = ["BEAM", "BUILD_PER_EVENT", "FINAL_BUILDS", "FINDERS", "LOOKAHEAD", "MAX_SLICES",
           "MIN_SAVING", "SliceChoice", "SliceScore", "find_slices", "score_slices"]

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
        events: Events of the whole sliced schedule, before lowering (every slice's):
            what the plan's final build is linear in.
    """

    slices: SlicePlan
    peak_bytes: int
    forward_flops: int
    backward_flops: int
    copies: int
    copy_bytes: int
    events: int = 0

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
    return _score(plan, slices, grad, itemsize=itemsize, strategy=strategy, options=options,
                  fused=fused, upstream_copy=upstream_copy)[0]


def _score(
    plan: Plan, slices: SlicePlan, grad: Iterable[int], *, itemsize: int, strategy: str,
    options: Mapping[str, Any] | None, fused: bool, upstream_copy: bool,
) -> tuple[SliceScore, int]:
    """:func:`score_slices`, and the events it built (one slice of each set of lengths)."""
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
    buffers = len(schedule.events) - sum(schedule.slice_events.values())
    whole = buffers + sum(schedule.slice_events[members[0]] * len(members)
                          for members in groups.values())
    return SliceScore(slices=slices, peak_bytes=memory.peak_bytes, forward_flops=forward,
                      backward_flops=backward, copies=copies,
                      copy_bytes=copy_elements * itemsize,
                      events=whole), len(schedule.events)


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
        self.event_s: list[float] = []  # each scoring's seconds per event built, sorted
        self.most_events = 0  # the most events of a plan scored

    def build_s(self, events: int) -> float:
        """Predicted seconds of the final build of a plan of ``events`` events.

        :data:`BUILD_PER_EVENT` times the scorings' median seconds per event built.
        """
        if not self.event_s:
            return 0.0
        return BUILD_PER_EVENT * self.event_s[len(self.event_s) // 2] * events

    def out_of_time(self, events: int = 0) -> bool:
        """Whether the search's deadline leaves too little for one more slice plan.

        The finder leaves :data:`FINAL_BUILDS` scorings' time and the final build of the
        largest plan among those scored and the next (``events``: its events, estimated)
        before the deadline: the chosen plan is built once more after the finder.
        """
        left = remaining_s()
        return left is not None and left <= (FINAL_BUILDS * self.last_s
                                             + self.build_s(max(events, self.most_events)))

    def affordable(self, found: SliceScore) -> bool:
        """Whether the deadline leaves time for ``found``'s final build (True without one)."""
        left = remaining_s()
        return left is None or self.build_s(found.events) <= left

    def within_time(self, found: SliceScore) -> SliceScore:
        """``found`` if its final build fits the time left, else the best that does.

        The best: the fitting plan of fewest FLOPs, or the least peak where none fits,
        among the plans scored whose build fits (fewer slices than ``found``).
        """
        if self.affordable(found):
            return found
        pool = self._pool()
        fitting = [s for s in pool if self.fits(s)]
        if fitting:
            return min(fitting, key=lambda s: (s.flops, s.peak_bytes, s.slices.count))
        return min(pool, key=lambda s: (s.peak_bytes, s.flops, s.slices.count))

    def _pool(self) -> list[SliceScore]:
        """The plans scored whose final build fits the time left (at least the smallest)."""
        pool = [s for s in self.seen.values() if self.affordable(s)]
        return pool or [min(self.seen.values(), key=lambda s: (s.events, s.peak_bytes))]

    def __call__(self, slices: SlicePlan) -> SliceScore:
        found = self.seen.get(slices)
        if found is None:
            start = now()
            found, built = _score(self.plan, slices, self.grad, itemsize=self.itemsize,
                                  strategy=self.strategy, options=self.options,
                                  fused=self.fused, upstream_copy=self.upstream_copy)
            self.last_s = now() - start
            bisect.insort(self.event_s, self.last_s / max(built, 1))
            self.most_events = max(self.most_events, found.events)
            self.seen[slices] = found
        return found

    def fits(self, score: SliceScore) -> bool:
        return self.budget is None or score.peak_bytes <= self.budget

    def smallest(self) -> SliceScore:
        """The least peak among the plans whose final build fits the time left."""
        return min(self._pool(), key=lambda s: (s.peak_bytes, s.flops, s.slices.count))


FINAL_BUILDS = 3.0
"""Scorings' worth of time the finder leaves before the deadline beside the chosen plan's
final build (:data:`BUILD_PER_EVENT`): what that build costs whatever its events (the
slices' plans and strategies, one per set of lengths)."""

BUILD_PER_EVENT = 1.0
"""The final build's seconds per event of the whole schedule (built, lowered, replayed,
its time predicted), over the scorings' median seconds per event they build (built,
lowered, replayed). Measured on the 2-core CPU: 0.57 (tucker, 1,024 slices), 0.65
(mps-layer, 1,024; tn18-b512, 640) and 0.90 (tn18-b512, 20 slices): the scorings' own
seconds, a little above the build's, leave the margin."""


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
    search's deadline comes within :data:`FINAL_BUILDS` scorings and the final build of
    the next plan (:meth:`_Scorer.out_of_time`;
    :func:`~einsum_analyze.model.deadline.remaining_s`) it scores nothing more and
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
                old = chunks.get(label, sizes[label])
                new = -(-old // 2)
                if new == old:
                    continue
                trial = _with_chunk(current.slices, label, sizes[label], new)
                if trial.count > max_slices or trial in children:
                    continue
                if score.out_of_time(-(-current.events * trial.count
                                       // max(current.slices.count, 1))):
                    late = True
                    break
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
    # Only a plan whose final build fits the time left: else the best whose build does.
    results = [(score.within_time(s), name) for s, name in results]
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
