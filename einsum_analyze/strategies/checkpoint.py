"""``checkpoint``: reverse mode that keeps some intermediates and recomputes the others.

Reverse mode (:mod:`.reverse`) keeps, after the forward pass, every intermediate that a
gradient step reads. Checkpointing keeps a chosen set of intermediates instead. An
intermediate that a gradient step reads but that was not kept is recomputed from the
tensors below it in the contraction tree (kept intermediates and the operands, which are
always available), just before that gradient step, and freed right after it. Recomputing
an intermediate means running its sub-tree again down to the kept tensors; the
intermediates of that sub-tree are freed as soon as the next one up is made.

:mod:`.checkpoint_schedule` builds the schedule of a keep-set and replays it. The set is
chosen on the replay of the lowered schedule, the figure the report shows
(layout copies included), by :func:`choose_keep`:

- with a budget (``budget_bytes``, the training peak, inputs included): the least
  recompute FLOPs among the sets whose peak fits, ties to the lower peak; when no set
  fits, the set of least peak, and the result says so (``fits_budget: false`` and a
  warning);
- without a budget: the least peak, ties to the fewer recompute FLOPs;
- ``keep``: an explicit list of intermediates (single-use ids), no search.

The search is exact (branch and bound over the keep-sets, checked against brute force
in the tests) up to :data:`EXACT_LIMIT` candidate intermediates, greedy up to
:data:`GREEDY_LIMIT`, and above that it tries only the sets that drop the largest
candidates first (a few replays in all). The ``checkpoint`` section of the result says
which search ran, what is kept, what is recomputed and at what cost. docs/method.md section 10
describes the method.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Literal, assert_never, get_args

from ..errors import PlanningError
from ..model.deadline import past_deadline
from ..model.parsing import parse_bytes
from ..model.planning import Plan
from .checkpoint_schedule import (
    KeepSchedules,
    checkpoint_candidates,
    checkpoint_events,
    count_recompute_flops,
    evaluate_keep,
    read_in_backward,
    recompute_counts,
)
from .common import ScheduleBuilder, StrategyInput
from .registry import StrategySpec

__all__ = [
    "EXACT_EVALUATIONS",
    "EXACT_LIMIT",
    "GREEDY_LIMIT",
    "SPEC",
    "KeepChoice",
    "KeepSchedules",
    "SearchChoice",
    "SearchMethod",
    "build_checkpoint",
    "checkpoint_candidates",
    "checkpoint_events",
    "choose_keep",
    "count_recompute_flops",
    "evaluate_keep",
    "read_in_backward",
    "recompute_counts",
]

EXACT_LIMIT = 16
"""Candidate intermediates up to which the keep-set is searched exactly."""

EXACT_EVALUATIONS = 400
"""Replays the exact search may spend (about a millisecond each on tn18-b512); past them
it returns the best set found, the greedy one or better, and says so."""

GREEDY_LIMIT = 40
"""Candidate intermediates up to which the greedy heuristic runs (quadratic in replays);
above, only the sets that drop the largest candidates first are tried."""

SearchMethod = Literal["given", "none", "exact", "greedy", "largest-first"]
"""How the keep-set was chosen: ``given`` (the ``keep`` option), ``none`` (nothing to
choose: no gradient, or no intermediate a gradient reads), ``exact``, ``greedy`` or
``largest-first`` (see :func:`choose_keep`)."""

SearchChoice = Literal["auto", "exact", "greedy", "largest-first"]
"""The ``search`` option: ``auto`` picks by the number of candidates (:func:`choose_keep`);
the others force one search."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepChoice:
    """A keep-set and the replay of its lowered schedule.

    Attributes:
        keep: Single-use ids of the intermediates kept after forward.
        peak_bytes: Training peak, inputs included.
        recompute_flops: FLOPs of the forward steps run again in backward.
        fits: Whether the peak is within the budget; None without a budget.
        method: How the set was chosen.
        candidates: The intermediates the search decided on.
        evaluated: Keep-sets replayed by the search.
        complete: False when the exact search ran out of replays or of time (the
            greedy choice, or a better one it found, is returned).
        timed_out: The training search's deadline
            (:func:`~einsum_analyze.model.deadline.past_deadline`) stopped the search:
            the best set found so far is returned.
    """

    keep: frozenset[int]
    peak_bytes: int
    recompute_flops: int
    fits: bool | None
    method: SearchMethod
    candidates: tuple[int, ...]
    evaluated: int
    complete: bool = True
    timed_out: bool = False


class _Search:
    """Replays keep-sets (each once) and ranks them by the objective."""

    def __init__(self, template: KeepSchedules, itemsize: int, budget: int | None) -> None:
        self.template = template
        self.plan = template.plan
        self.grad = template.grad
        self.itemsize = itemsize
        self.budget = budget
        self.seen: dict[frozenset[int], tuple[int, int]] = {}
        self.best: frozenset[int] | None = None
        self.sizes = {step.output: step.output_elements for step in self.plan.steps}
        self.timed_out = False

    def out_of_time(self) -> bool:
        """Whether the training search's deadline has passed (remembered: :attr:`timed_out`)."""
        self.timed_out = self.timed_out or past_deadline()
        return self.timed_out

    def flops(self, keep: frozenset[int]) -> int:
        """Recompute FLOPs of ``keep`` (no replay)."""
        return count_recompute_flops(self.plan, self.grad, keep)

    def replay(self, keep: frozenset[int]) -> tuple[int, int]:
        """Peak and recompute FLOPs of ``keep``; the best set so far is updated."""
        found = self.seen.get(keep)
        if found is None:
            found = (self.template.peak(keep, self.itemsize), self.flops(keep))
            self.seen[keep] = found
            if self.best is None or self.key(keep) < self.key(self.best):
                self.best = keep
        return found

    def rank(self, peak: int, flops: int) -> tuple[int, int, int]:
        """The objective as a key to minimise (see :func:`choose_keep`)."""
        if self.budget is None:
            return (0, peak, flops)
        if peak <= self.budget:
            return (0, flops, peak)
        return (1, peak, flops)

    def key(self, keep: frozenset[int]) -> tuple[int, int, int, int, tuple[int, ...]]:
        """:meth:`rank`, then the fewer bytes kept, then the ids: one order, no ties."""
        peak, flops = self.seen[keep]
        kept = sum(self.sizes[k] for k in keep)
        return (*self.rank(peak, flops), kept, tuple(sorted(keep)))

    def choice(self, method: SearchMethod, candidates: tuple[int, ...],
               complete: bool = True) -> KeepChoice:
        """The best set replayed, as a :class:`KeepChoice`."""
        assert self.best is not None
        peak, flops = self.seen[self.best]
        return KeepChoice(
            keep=self.best,
            peak_bytes=peak,
            recompute_flops=flops,
            fits=None if self.budget is None else peak <= self.budget,
            method=method,
            candidates=candidates,
            evaluated=len(self.seen),
            complete=complete,
            timed_out=self.timed_out,
        )


def choose_keep(
    plan: Plan,
    grad: Collection[int],
    itemsize: int,
    budget_bytes: int | None = None,
    *,
    search: SearchChoice = "auto",
    exact_evaluations: int | None = None,
    upstream_copy: bool = False,
) -> KeepChoice:
    """Choose the intermediates to keep after forward.

    Objective: with a budget, the least recompute FLOPs among the keep-sets whose
    training peak (inputs included) fits it, ties to the lower peak; when none fits, the
    least peak. Without a budget, the least peak, ties to the fewer recompute FLOPs.
    Remaining ties go to the set that keeps fewer elements (nothing is kept for
    nothing), then to the smaller ids.

    Only :func:`checkpoint_candidates` are decided on (the others are never kept). With
    ``search="auto"``: up to :data:`EXACT_LIMIT` candidates, a branch and bound over the
    keep-sets finds the optimum (:func:`_branch_and_bound`, started from the greedy
    choice, within ``exact_evaluations`` replays); up to :data:`GREEDY_LIMIT`, greedy
    (:func:`_greedy`); above, the largest-first sets only (:func:`_largest_first`).

    Args:
        plan: The forward plan.
        grad: Operands that need a gradient.
        itemsize: Bytes per element.
        budget_bytes: The training budget; None for the least peak.
        search: ``auto``, or the search to run whatever the number of candidates.
        exact_evaluations: Most replays for the exact search (None:
            :data:`EXACT_EVALUATIONS`).
        upstream_copy: The seed copies the upstream gradient (complex dtypes).

    Returns:
        The :class:`KeepChoice`.
    """
    template = KeepSchedules(plan, frozenset(grad), upstream_copy)
    candidates = checkpoint_candidates(plan, template.grad)
    searching = _Search(template, itemsize, budget_bytes)
    searching.replay(template.read)  # reverse mode
    if not candidates:
        return searching.choice("none", candidates)
    method: Literal["exact", "greedy", "largest-first"]
    if search == "auto":
        method = ("exact" if len(candidates) <= EXACT_LIMIT
                  else "greedy" if len(candidates) <= GREEDY_LIMIT else "largest-first")
    else:
        method = search
    match method:
        case "largest-first":
            _largest_first(searching)
            return searching.choice("largest-first", candidates)
        case "greedy":
            _greedy(searching, candidates)
            return searching.choice("greedy", candidates)
        case "exact":
            _greedy(searching, candidates)
            limit = EXACT_EVALUATIONS if exact_evaluations is None else exact_evaluations
            complete = _branch_and_bound(searching, candidates, limit)
            return searching.choice("exact", candidates, complete)
        case _:
            assert_never(method)


def _greedy(search: _Search, candidates: tuple[int, ...]) -> None:
    """Drop, one at a time, the kept tensor that saves the most peak per recompute FLOP.

    From reverse mode (keeping what a gradient reads): while the budget is not met (or,
    without one, while the peak can still go down), replay each kept tensor dropped and
    drop the one of the best ratio (peak saved over recompute FLOPs added; a drop that
    adds none ranks first; ties to the larger saving). With a budget met, candidates
    not kept are then put back, the one that saves the most recompute first, while the
    peak still fits.
    """
    keep = search.template.read
    while keep and not search.out_of_time():
        peak, flops = search.replay(keep)
        if search.budget is not None and peak <= search.budget:
            break
        best: tuple[float, int, frozenset[int]] | None = None
        for k in sorted(keep):
            if search.out_of_time():
                break
            trial = keep - {k}
            trial_peak, trial_flops = search.replay(trial)
            saved = peak - trial_peak
            if saved <= 0:
                continue
            added = trial_flops - flops
            ratio = math.inf if added <= 0 else saved / added
            if best is None or (ratio, saved) > best[:2]:
                best = (ratio, saved, trial)
        if best is None:
            break
        keep = best[2]
    budget = search.budget
    assert search.best is not None
    keep = search.best
    peak, flops = search.replay(keep)
    if budget is None or peak > budget:
        return
    while not search.out_of_time():
        trials = sorted((search.flops(keep | {k}), k) for k in candidates if k not in keep)
        for trial_flops, k in trials:
            if trial_flops < flops and search.replay(keep | {k})[0] <= budget:
                keep, flops = keep | {k}, trial_flops
                break
        else:
            return


def _largest_first(search: _Search) -> None:
    """Drop the m largest of the tensors reverse mode keeps, for m = 0, 1, 2, 4, ..., all.

    With a budget, the first m that fits is then narrowed by bisection. A handful of
    replays: the search for networks too large for the greedy one.
    """
    sizes = {step.output: step.output_elements for step in search.plan.steps}
    order = sorted(search.template.read, key=lambda k: (-sizes[k], k))

    def dropping(m: int) -> frozenset[int]:
        return frozenset(order[m:])

    tried = [0]
    m = 1
    while m < len(order):
        tried.append(m)
        m *= 2
    tried.append(len(order))
    budget = search.budget
    fitting: int | None = None
    for m in tried:
        if search.out_of_time():
            return
        peak, _ = search.replay(dropping(m))
        if budget is not None and peak <= budget:
            fitting = m
            break
    if budget is None or fitting is None or fitting <= 1:
        return
    low, high = fitting // 2, fitting  # low does not fit, high does
    while high - low > 1 and not search.out_of_time():
        middle = (low + high) // 2
        if search.replay(dropping(middle))[0] <= budget:
            high = middle
        else:
            low = middle


def _branch_and_bound(search: _Search, candidates: tuple[int, ...], limit: int) -> bool:
    """Exact search over the keep-sets of ``candidates``; False if it ran out of replays.

    Depth first, deciding the candidates bottom-up (single-use ids ascending: a tensor
    after everything below it), keeping before dropping, from the best set found so far
    (the greedy one). A node (kept K among the decided D, the rest undecided U) is cut
    when the best key any set S with K <= S <= K | U can reach is no better than the
    best found. Two bounds hold for every such S: its recompute FLOPs are at least those
    of K | U (keeping more never recomputes more), and its peak is at least
    :meth:`KeepSchedules.floor` of (K, D).
    """
    template = search.template
    order = sorted(candidates)
    floors: dict[tuple[frozenset[int], int], int] = {}

    def floor(keep: frozenset[int], depth: int) -> int:
        # Dropping a candidate leaves K alone but adds it to D: the floor can only rise.
        value = floors.get((keep, depth))
        if value is None:
            value = template.floor(keep, order[:depth], search.itemsize)
            floors[(keep, depth)] = value
        return value

    counted = len(search.seen)
    # (depth, kept, the parent's floor: a bound for this node's sets too, and free)
    stack: list[tuple[int, frozenset[int], int]] = [(0, frozenset(), 0)]
    while stack:
        if search.out_of_time():
            return False
        depth, keep, inherited = stack.pop()
        least_flops = search.flops(keep | frozenset(order[depth:]))
        assert search.best is not None
        best = search.key(search.best)[:3]
        if search.rank(inherited, least_flops) >= best:
            continue
        own = floor(keep, depth)
        if search.rank(own, least_flops) >= best:
            continue
        if depth == len(order):
            if keep not in search.seen:
                if len(search.seen) - counted >= limit:
                    return False
                search.replay(keep)
            continue
        k = order[depth]
        stack.append((depth + 1, keep, own))  # drop k: popped second
        stack.append((depth + 1, keep | {k}, own))  # keep k: popped first
    return True


def _budget(value: Any) -> int | None:
    """The ``budget_bytes`` option: None, a positive number of bytes or a size text."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = parse_bytes(value.strip())
        except ValueError as err:
            raise PlanningError(f"checkpoint budget_bytes: {err}") from err
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise PlanningError(
            f"checkpoint budget_bytes must be a positive size in bytes; got {value!r}"
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PlanningError(f"checkpoint budget_bytes must be finite; got {value!r}")
        value = int(value)
    return int(value)


def _keep(plan: Plan, value: Any) -> frozenset[int]:
    """The ``keep`` option: single-use ids of intermediates."""
    num_ops = plan.equation.num_operands
    final = plan.steps[-1].output
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise PlanningError(f"checkpoint keep must be a list of intermediate ids; got {value!r}")
    ids: set[int] = set()
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise PlanningError(f"checkpoint keep: {item!r} is not an intermediate id")
        if not num_ops <= item < final:
            where = (f"the intermediates are {num_ops} to {final - 1}" if final > num_ops
                     else "this plan has no intermediate")
            raise PlanningError(
                f"checkpoint keep: {item} is not an intermediate (operands are 0 to "
                f"{num_ops - 1}, the output is {final}); {where}"
            )
        ids.add(int(item))
    return frozenset(ids)


def build_checkpoint(given: StrategyInput) -> ScheduleBuilder:
    """The ``checkpoint`` strategy's builder: choose the keep-set, then its schedule."""
    plan, grad, itemsize = given.plan, given.grad, given.itemsize
    budget = _budget(given.options.get("budget_bytes"))
    search = given.options.get("search", "auto")
    if search not in get_args(SearchChoice):
        raise PlanningError(
            f"checkpoint search must be one of {', '.join(get_args(SearchChoice))}; "
            f"got {search!r}"
        )
    keep_option = given.options.get("keep")
    if keep_option is not None:
        keep = _keep(plan, keep_option)
        if not grad:
            keep = frozenset()  # nothing is kept for a backward that does not run
        peak, flops = evaluate_keep(plan, grad, keep, itemsize, given.upstream_copy)
        choice = KeepChoice(
            keep=keep, peak_bytes=peak, recompute_flops=flops,
            fits=None if budget is None else peak <= budget, method="given",
            candidates=checkpoint_candidates(plan, grad), evaluated=1,
        )
    else:
        choice = choose_keep(plan, grad, itemsize, budget, search=search,
                             upstream_copy=given.upstream_copy)
    builder = checkpoint_events(plan, grad, choice.keep)
    builder.details["checkpoint"] = _details(plan, grad, choice, budget, itemsize)
    builder.warnings.extend(_warnings(choice, budget))
    return builder


def _details(plan: Plan, grad: frozenset[int], choice: KeepChoice, budget: int | None,
             itemsize: int) -> dict[str, Any]:
    """The JSON ``checkpoint`` section of the strategy."""
    steps = {step.output: step for step in plan.steps}
    counts = recompute_counts(plan, grad, choice.keep) if grad else {}
    return {
        "search": choice.method,
        "complete": choice.complete,
        "budget_bytes": budget,
        "fits_budget": choice.fits,
        "recompute_flops": choice.recompute_flops,
        "candidates": len(choice.candidates),
        "evaluated": choice.evaluated,
        "kept": [
            {"id": i, "term": steps[i].output_term,
             "bytes": steps[i].output_elements * itemsize}
            for i in sorted(choice.keep)
        ],
        "recomputed": [
            {"id": i, "term": steps[i].output_term,
             "bytes": steps[i].output_elements * itemsize,
             "times": times, "flops": steps[i].flops * times}
            for i, times in sorted(counts.items())
        ],
    }


def _warnings(choice: KeepChoice, budget: int | None) -> list[str]:
    notes: list[str] = []
    if choice.method in ("greedy", "largest-first"):
        notes.append(
            f"checkpoint: {len(choice.candidates)} intermediates to decide on, more than "
            f"the exact search's {EXACT_LIMIT}; the {choice.method} heuristic chose which "
            "to keep"
        )
    if choice.timed_out:
        notes.append(
            f"checkpoint: the search's deadline stopped the {choice.method} search after "
            f"{choice.evaluated} replays; the intermediates kept are the best found"
        )
    elif not choice.complete:
        notes.append(
            f"checkpoint: the exact search stopped after {EXACT_EVALUATIONS} replays; the "
            "intermediates kept are the best found, not proven the best"
        )
    if choice.fits is False:
        assert budget is not None
        if choice.method == "given":
            notes.append(
                f"checkpoint: the training peak with the intermediates kept as given is "
                f"{choice.peak_bytes:,} bytes, above the budget of {budget:,} bytes "
                "(inputs included)"
            )
        else:
            proven = choice.method in ("exact", "none") and choice.complete
            notes.append(
                f"checkpoint: no choice of intermediates to keep fits the budget of "
                f"{budget:,} bytes (inputs included); the least training peak "
                f"{'it can reach' if proven else 'found'} is {choice.peak_bytes:,} bytes"
            )
    return notes


SPEC = StrategySpec(
    name="checkpoint",
    build=build_checkpoint,
    description="reverse mode keeping a chosen set of intermediates and recomputing the "
    "others during backward",
    default=False,
    options={"budget_bytes": None, "keep": None, "search": "auto"},
)
