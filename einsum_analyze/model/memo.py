"""What one analysis computes more than once, remembered while it runs.

**Paths.** One analysis asks opt_einsum for the same path more than once: the forward path of a
large network is greedy's (``auto`` is greedy above 14 operands), and the training
search's ``greedy`` candidate is that path again; each limit of a sweep does both, and
a replanning under a limit (:func:`einsum_analyze.model.planning.check_memory_limit`) asks for
greedy's path under it. Under a memory limit opt_einsum's greedy is a branch-and-bound
search (``branch`` with one branch), which takes about half a second at 200 tensors.

Only optimizers that return the same path for the same input are remembered (greedy,
optimal and the branch searches, ``auto`` as the one it resolves to); the key is the
optimizer, the terms, the output, the sizes and the limit.

**Kernels.** One analysis lowers the forward plan three times (for the inference
memory and as the forward phase of each strategy), and the strategies' backward phases
ask for many of the same products: the lowering's kernel choices depend only on the
inputs' layouts, the output and the sizes, so the lowerings of one analysis share them
(:func:`shared_table`).

**Strategies.** A strategy modelled on a path gives the same result under every limit
of a sweep, unless it plans gradient contractions (those obey the limit); the
``torch-autograd`` model does not even read the path (torch plans its own). A sweep
models each once (:func:`remembered`).

Everything is remembered only inside :func:`remembered_paths` (``analyze`` opens it for
its limits and its search), and forgotten when it ends: an analysis never reuses
another's work, so timing repeated analyses measures each in full.

**Collections.** An analysis builds hundreds of thousands of small tuples (events,
layouts, kernels) and keeps them in these tables until it ends. Python's cyclic
garbage collector, run every 700 allocations, walks them again and again, though they
hold no reference cycles: 15% of the CPU time of a 500-tensor analysis, 5% at 100.
:func:`paused_collection` pauses it while the analysis runs; anything cyclic made
meanwhile is collected at the next collection after it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .equation import Equation

__all__ = ["deterministic_path", "paused_collection", "remembered_paths", "remembered",
           "shared_table", "shared_tables", "strategy_key"]

_Memo = dict[tuple[Any, ...], Any]
_SCOPE: ContextVar[_Memo | None] = ContextVar("einsum_analyze_memo", default=None)


@contextmanager
def remembered_paths() -> Iterator[None]:
    """Remember deterministic paths until the block ends (nested blocks share one)."""
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


@contextmanager
def paused_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector until the block ends (see the module's text).

    A collector already paused (by the caller, or an outer block) stays paused; one
    that ran runs again when the block ends, also on an error.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _deterministic(name: str, num_operands: int) -> Callable[..., Any] | None:
    """opt_einsum's path function for ``name`` when it is deterministic; else None."""
    from opt_einsum import paths

    try:
        function = paths.get_path_fn(name)
    except (KeyError, ValueError):
        return None
    if function is paths.auto:
        choices = getattr(paths, "_AUTO_CHOICES", None)
        if not isinstance(choices, dict):
            return None
        function = choices.get(num_operands, paths.greedy)
    fixed = (paths.greedy, paths.optimal, paths.branch_all, paths.branch_2, paths.branch_1)
    return function if function in fixed else None


def deterministic_path(
    equation: Equation, name: str, memory_limit: int | None
) -> list[tuple[int, ...]] | None:
    """opt_einsum's path for ``equation`` by ``name`` under ``memory_limit``, remembered.

    Returns None when ``name`` is not a deterministic optimizer (the caller runs it).
    Outside :func:`remembered_paths` nothing is remembered. opt_einsum's errors
    (ValueError, KeyError, RuntimeError) propagate and nothing is remembered.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])
        >>> deterministic_path(eq, "greedy", None)
        [(1, 2), (0, 1)]
    """
    function = _deterministic(name, equation.num_operands)
    if function is None:
        return None
    remembered = _SCOPE.get()
    key = ("path", function, tuple(equation.terms), equation.output,
           tuple(sorted(equation.size_dict.items())), memory_limit)
    if remembered is not None and key in remembered:
        return [tuple(step) for step in remembered[key]]
    inputs = [frozenset(term) for term in equation.terms]
    path: Sequence[Sequence[int]] = function(
        inputs, frozenset(equation.output), dict(equation.size_dict), memory_limit
    )
    steps = tuple(tuple(int(i) for i in step) for step in path)
    if remembered is not None:
        remembered[key] = steps
    return [tuple(step) for step in steps]


def remembered(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()``'s result, remembered under ``key`` inside :func:`remembered_paths`.

    For strategy results (:func:`strategy_key`), gradient plans and random-greedy's
    samples (opt_einsum's ``RandomGreedy`` ignores the memory limit: each limit of a
    sweep would draw the same paths, then keep those that meet it).

    The caller's key must hold everything the result depends on.
    """
    remembered = _SCOPE.get()
    if remembered is None:
        return build()
    full = ("built", *key)
    if full not in remembered:
        remembered[full] = build()
    return remembered[full]


def shared_table(kind: str, sizes: Mapping[str, int]) -> dict[Any, Any]:
    """A table of pure answers over ``sizes``, shared inside :func:`remembered_paths`.

    The caller fills it with answers that depend only on their key and ``sizes`` (the
    lowering's kernel choices). Outside :func:`remembered_paths` it is a new table.
    """
    return shared_tables(sizes, kind)[0]


def shared_tables(sizes: Mapping[str, int], *kinds: str) -> tuple[dict[Any, Any], ...]:
    """:func:`shared_table` of each of ``kinds``, the key of ``sizes`` built once."""
    remembered = _SCOPE.get()
    if remembered is None:
        return tuple({} for _ in kinds)
    over = tuple(sorted(sizes.items()))
    tables = []
    for kind in kinds:
        key = ("table", kind, over)
        table = remembered.get(key)
        if table is None:
            table = remembered[key] = {}
        tables.append(table)
    return tuple(tables)


def strategy_key(name: str, plan: Any, grad: Sequence[int], *, itemsize: int,
                 options: Any = None, upstream_copy: bool = False,
                 gradients: Any = None, own_path: bool = False) -> tuple[Any, ...]:
    """What a strategy's result depends on, as a key for :func:`remembered`.

    Its name, the path (not when ``own_path``: the strategy plans its own, as
    ``torch-autograd`` does, ``StrategySpec.own_path``), the operands differentiated,
    the element size, its options and ``gradients``, a key of its planned gradient
    contractions (None: it plans none).
    """
    where = (None if own_path
             else (plan.optimizer, tuple(tuple(step) for step in plan.path)))
    chosen = repr(sorted(dict(options or {}).items()))
    return (name, where, tuple(sorted(grad)), itemsize, chosen, upstream_copy, gradients)
