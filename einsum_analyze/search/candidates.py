"""Candidate contraction paths for the training-aware search.

Sources, each tagged with its name in the report:

- the report's forward path (its optimizer's name);
- opt_einsum's ``greedy``, and ``dp`` minimising FLOPs and size on networks small
  enough for it (:data:`DP_LIMIT` operands);
- ``random-greedy``: opt_einsum's random-greedy samples, seeded;
- ``cotengra-flops``, ``cotengra-write``, ``cotengra-combo``: cotengra's hyper-optimizer
  for each target when asked for (the ``cotengra`` extra), run in this process with
  ``parallel=False``, its greedy method only and a fixed seed, since its process pools
  have been seen to hang inside a multiprocessing child;
- ``greedy-limit-N``: greedy under a tighter limit of N elements, for plans of lower
  peak: the largest input and 8 times it (re-contracted under them), then a sweep that
  halves the forward path's largest intermediate down to one element (each path
  meeting its own limit as it runs, pairwise);
- ``reconfigured(START, COST)``: the cheapest of those trees by COST
  (:data:`RECONFIGURED_STARTS`) improved by exact sub-tree re-contraction
  (:mod:`.tree`) for reverse mode's training FLOPs or for a memory proxy.

Every path is pairwise: a step of three or more tensors runs as pairwise steps
(:func:`~einsum_analyze.model.pairwise.pairwise_path`), and the candidate is the path that
runs. It meets the memory limit where one is given (paths that break it are dropped):
under the user's limit, as opt_einsum planned it (a step of three tensors that no pair of
them fits is what the limit asks for, and the pairwise run is scored as it is); under a
tighter limit of the search's own, as it runs.
"""

from __future__ import annotations

import importlib.util
import math
import random
import time
from collections.abc import Sequence
from typing import Any

from ..model.deadline import past_deadline
from ..model.equation import Equation
from ..model.memo import deterministic_path, remembered
from ..model.pairwise import pairwise_path
from ..model.plan import Plan, describe_path
from ..model.types import LinearPath
from .tree import NodeCost, TreeModel, linear_to_tree, optimise_path

__all__ = [
    "COTENGRA_OBJECTIVES",
    "DP_LIMIT",
    "RECONFIGURED_STARTS",
    "candidate_paths",
    "cotengra_available",
    "cotengra_path",
]

DP_LIMIT = 24
"""Largest network that opt_einsum's ``dp`` plans as a candidate (it grows fast beyond)."""


RECONFIGURED_STARTS = 3
"""Candidate trees re-contracted for each node cost: the cheapest few by that cost."""


def cotengra_available() -> bool:
    """Whether cotengra is installed (checked without importing it)."""
    return importlib.util.find_spec("cotengra") is not None


def _opt_einsum(equation: Equation, name: str, limit: int | None, **options: Any
                ) -> LinearPath | None:
    from opt_einsum import paths

    inputs = [frozenset(t) for t in equation.terms]
    output = frozenset(equation.output)
    sizes = dict(equation.size_dict)
    try:
        if name == "dp":
            found = paths.DynamicProgramming(**options)(inputs, output, sizes, limit)
        elif name == "random-greedy":
            # RandomGreedy ignores the limit (the caller keeps the paths that meet it):
            # every limit of a sweep draws the same samples, drawn once.
            key = ("random-greedy", tuple(equation.terms), equation.output,
                   tuple(sorted(sizes.items())), repr(sorted(options.items())))
            found = remembered(key, lambda: _random_greedy(inputs, output, sizes, options))
        else:
            known = deterministic_path(equation, name, limit)
            found = (known if known is not None
                     else paths.get_path_fn(name)(inputs, output, sizes, limit))
    except (ValueError, KeyError, RuntimeError):
        return None
    return tuple(tuple(int(i) for i in step) for step in found)


def _random_greedy(inputs: list[frozenset[str]], output: frozenset[str],
                   sizes: dict[str, int], options: dict[str, Any]) -> Any:
    from opt_einsum.path_random import RandomGreedy

    chosen = dict(options)
    state = random.getstate()
    random.seed(chosen.pop("seed", 0))
    try:
        return RandomGreedy(parallel=False, **chosen)(inputs, output, sizes)
    finally:
        random.setstate(state)


COTENGRA_OBJECTIVES = ("flops", "write", "combo")
"""cotengra's ``minimize`` targets whose trees are candidates."""


def cotengra_path(equation: Equation, minimize: str = "flops", repeats: int = 16,
                  seed: int = 0) -> LinearPath | None:
    """Cotengra's hyper-optimized path (greedy method, in process, seeded); None if absent.

    The same equation, target, repeats and seed give the same tree.
    """
    if not cotengra_available() or equation.num_operands < 3:
        return None
    import cotengra  # type: ignore[import-untyped]
    import numpy

    inputs = [tuple(t) for t in equation.terms]
    # cotengra draws from the global generators: seed them for repeatable trees, and
    # leave the caller's states as they were.
    state, numpy_state = random.getstate(), numpy.random.get_state()
    random.seed(seed)
    numpy.random.seed(seed)
    try:
        optimizer = cotengra.HyperOptimizer(
            methods=["greedy"], max_repeats=repeats, minimize=minimize, parallel=False,
            progbar=False, seed=seed,
        )
        tree = optimizer.search(inputs, tuple(equation.output), dict(equation.size_dict))
        path = tree.get_path()
    except Exception:  # noqa: BLE001  (an optional extra must not break the analysis)
        return None
    finally:
        random.setstate(state)
        numpy.random.set_state(numpy_state)
    return tuple(tuple(int(i) for i in step) for step in path)


def _meets(equation: Equation, path: LinearPath, limit: int | None) -> bool:
    """Whether no intermediate of ``path``, its steps as given, is over ``limit``."""
    if limit is None:
        return True
    plan = describe_path(equation, path, "explicit")
    return all(step.output_elements <= limit for step in plan.steps[:-1])


def _path_cost(path: LinearPath, model: TreeModel) -> float:
    tree = linear_to_tree(path, model.equation.num_operands)
    return math.inf if tree is None else model.tree_cost(tree)


def candidate_paths(
    equation: Equation,
    grad: Sequence[int],
    *,
    forward: Plan,
    memory_limit: int | None = None,
    time_limit: float = 0.3,
    cotengra: bool | None = None,
    random_samples: int = 16,
    seed: int = 0,
    tighter_limits: Sequence[int] = (),
    sweep_limits: Sequence[int] = (),
) -> list[tuple[str, LinearPath]]:
    """Distinct candidate paths, each with its source (see the module).

    Args:
        equation: The equation.
        grad: Operands that need a gradient (they steer the re-contraction).
        forward: The report's forward plan (always a candidate).
        memory_limit: Largest intermediate allowed, in elements.
        time_limit: Seconds of re-contraction, above :data:`DP_LIMIT` operands (smaller
            networks re-contract every candidate fully, so results do not depend on load).
        cotengra: Use cotengra: True, False, or None for "when installed".
        random_samples: Random-greedy samples.
        seed: Seed of the random samples.
        tighter_limits: Element limits under which greedy paths are planned too (and
            re-contracted under them), for plans of lower training peak.
        sweep_limits: More element limits, under which greedy paths are planned but not
            re-contracted (the sweep down to the floor); the search's deadline
            (:func:`~einsum_analyze.model.deadline.past_deadline`) stops it.
    """
    # Small networks re-contract fully, whatever the load (repeatable results); larger
    # ones stop starting new work ``time_limit`` seconds after re-contraction begins.
    deadline: float | None = None
    n = equation.num_operands
    found: dict[LinearPath, str] = {}

    def add(source: str, path: LinearPath | None, limit: int | None = memory_limit) -> None:
        if path is None:
            return
        run = pairwise_path(equation, path)
        # The path as planned meets the user's limit; a limit of the search's own, as it runs.
        if _meets(equation, run, limit) or (limit == memory_limit
                                             and _meets(equation, path, limit)):
            found.setdefault(run, source)

    add(forward.optimizer, forward.as_planned.path)
    if n < 3:
        return [(source, path) for path, source in found.items()]
    add("greedy", _opt_einsum(equation, "greedy", memory_limit))
    if n <= DP_LIMIT:
        add("dp", _opt_einsum(equation, "dp", memory_limit, minimize="flops"))
        add("dp-size", _opt_einsum(equation, "dp", memory_limit, minimize="size"))
    if random_samples > 0:
        add("random-greedy", _opt_einsum(equation, "random-greedy", memory_limit,
                                         max_repeats=random_samples, seed=seed))
    use_cotengra = cotengra_available() if cotengra is None else cotengra
    if use_cotengra and memory_limit is None:
        for target in COTENGRA_OBJECTIVES:
            add(f"cotengra-{target}", cotengra_path(equation, target, seed=seed))
    grad_mask = sum(1 << k for k in grad)
    if n > DP_LIMIT:
        deadline = time.perf_counter() + time_limit

    def late() -> bool:
        return past_deadline() or (deadline is not None and time.perf_counter() > deadline)

    for tight in tighter_limits:
        if memory_limit is not None and tight >= memory_limit:
            continue
        path = _opt_einsum(equation, "greedy", tight)
        add(f"greedy-limit-{tight}", path, tight)
        if path is not None and not late():
            model = TreeModel(equation, grad_mask, tight, "retained")
            add(f"reconfigured(greedy-limit-{tight}, retained)",
                optimise_path(path, model, width=5, deadline=deadline))
    for tight in sweep_limits:
        # The sweep down to the floor: plain greedy paths, each meeting its own limit.
        if late():
            break
        if memory_limit is None or tight < memory_limit:
            add(f"greedy-limit-{tight}", _opt_einsum(equation, "greedy", tight), tight)
    starts = list(found.items())
    # Six pieces a sub-tree on small networks; five on large ones, where a pass over
    # every node must fit the time.
    width = 6 if n <= DP_LIMIT else 5
    jobs: list[tuple[NodeCost, int]] = [("training-flops", width), ("retained", width)]
    for kind, width in jobs:
        model = TreeModel(equation, grad_mask, memory_limit, kind)
        # The cheapest trees first: they lead to the best ones soonest.
        costs = {path: _path_cost(path, model) for path, _ in starts}
        ordered = sorted(starts, key=lambda item: costs[item[0]])[:RECONFIGURED_STARTS]
        for path, source in ordered:
            if late():
                break
            better = optimise_path(path, model, width=width, deadline=deadline)
            add(f"reconfigured({source}, {kind})", better)
    return [(source, path) for path, source in found.items()]
