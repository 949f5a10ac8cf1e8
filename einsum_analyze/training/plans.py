"""The drop-in einsum's plans: compiled once for the torch executor, and cached.

A :class:`DropinPlan` is one strategy's schedule compiled for the torch executor
(:mod:`einsum_analyze.backends.torch_kernels`), with what the custom op needs around it:
which tensors the forward pass leaves for backward (the caller's operands it reads,
and the new tensors it keeps), and the shape and strides of every tensor the two ops
return, found once by running the schedule on the ``meta`` device (the ops' fake
implementations return tensors of exactly those layouts).

Under ``strategy="auto"`` a plan may say that eager calls run torch.einsum itself
(``runs_torch``, :func:`.choice.choose_dropin`): no plan of ours is predicted to beat it.
Under ``torch.compile`` (``compiled_runs_torch``), ``auto`` without a budget always
runs torch.einsum, which the compiler lowers into its own kernels and fuses with their
backward; the plan's op is opaque to it, and cost 2.5x compiled torch.einsum's time on
``tn18-b512`` (2-core cpu) where eagerly it takes 0.6x torch.einsum's.
:func:`cache_info` lists each cached call's choice and its reason, and every miss logs
it (logger ``einsum_analyze.torch``, level DEBUG).

Plans are cached by equation, shapes, dtype, device, the operands that need gradients
and the options, in a bounded least-recently-used cache that threads may share.

:mod:`einsum_analyze.torch` and :mod:`.node` call this module; on a miss it calls down
into :mod:`.choice` (which strategy) and the torch backend (compile, lay out), never back
up. It imports torch.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from ..errors import DropinError, DropinValueError, EinsumAnalyzeError
from ..strategies import StrategyResult
from .calls import TORCH_EINSUM, same_layout, torch_layout
from .choice import NO_BUDGET, choose_dropin, planning_time
from .graphs import GraphSlot
from .relayout import with_layout_copy, written_in_layout

__all__ = [
    "DTYPE_NAMES",
    "CacheInfo",
    "DropinPlan",
    "PlanChoice",
    "build_plan",
    "cache_info",
    "clear_cache",
    "eager_plan",
    "get_plan",
    "plan_eager_call",
    "plan_key",
    "set_cache_size",
    "traced_runs_torch",
]

Layout = tuple[tuple[int, ...], tuple[int, ...]]

_LOG = logging.getLogger("einsum_analyze.torch")


def _input_error(message: str, equation: str, shapes: Sequence[Sequence[int]]) -> DropinError:
    """The error to raise: of the type torch.einsum raises for the same input."""
    try:
        TORCH_EINSUM(equation, *(torch.empty(tuple(s), device="meta") for s in shapes))
    except ValueError:
        return DropinValueError(message)
    except Exception:  # noqa: BLE001 - torch's own RuntimeError, or anything else
        return DropinError(message)
    return DropinError(message)


class PlanChoice(NamedTuple):
    """What one cached call runs, and why.

    ``runs`` is ``"torch.einsum"`` where eager calls call torch.einsum itself, else the
    strategy of the plan; ``grad`` the positions of the operands that need gradients;
    ``compiled`` what a call traced by ``torch.compile`` runs, in the same words;
    ``graphs`` whether eager calls replay CUDA graphs and why, or why not (a CUDA device
    only, :meth:`.graphs.GraphSlot.describe`; empty elsewhere).
    """

    equation: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    device: str
    grad: tuple[int, ...]
    runs: str
    reason: str
    compiled: str = ""
    graphs: str = ""


class CacheInfo(NamedTuple):
    """The plan cache's counters, and each cached call's choice (least recent first)."""

    hits: int
    misses: int
    size: int
    maxsize: int
    choices: tuple[PlanChoice, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DropinPlan:
    """One planned einsum, compiled for the torch executor.

    Attributes:
        strategy: The strategy run (``auto`` resolved).
        result: The strategy's model (schedule, FLOPs, memory).
        compiled: The schedule compiled into torch calls.
        output: Name of the forward result.
        grad: Positions of the operands whose gradients backward returns.
        saved_operands: Positions of the operands backward reads (saved, never copied).
        new_saved: Names of the tensors forward makes and keeps for backward (returned
            by the forward op after the result, so that autograd saves them).
        forward_layouts: Shape and strides of the result and of each ``new_saved``.
        gradient_layouts: Shape and strides of each gradient, in ``grad`` order.
        output_may_alias: The result is an operand or a view of one (e.g. ``ij->ij``):
            the ops return a copy, as an op's outputs may not alias its inputs.
        operand_names: ``in0``, ``in1``, ... (one per operand).
        saved_names: Names of the saved tensors, in the order the backward op takes them
            (set from ``saved_operands`` and ``new_saved``).
        gradient_names: ``d0``, ... in ``grad`` order (set from ``grad``).
        relayout: Shape and strides of torch.einsum's result where the schedule's
            differs: forward copies its result into that layout (the copy is in
            ``result``'s events and memory); None where they agree.
        equation: The equation as the caller wrote it (a double backward runs
            torch.einsum on it).
        runs_torch: Eager calls run torch.einsum itself (``auto`` found no plan
            predicted to beat it), through :meth:`call_torch`; so do traced calls.
        compiled_runs_torch: Calls traced by ``torch.compile`` run torch.einsum (as
            ``runs_torch``, or ``auto`` without a budget: the compiler's own lowering
            of torch.einsum is the faster); else they run this plan through the
            custom op.
        reason: Why this plan, or torch.einsum, runs (one line, with the figures).
        torch_path: The flat path torch.einsum asks opt_einsum for on these shapes
            (``torch.backends.opt_einsum`` as it was when the plan was made); None where
            it asks for none (two operands or fewer) or torch.einsum is left to plan
            (opt_einsum off or unavailable).
        graphs: The entry's CUDA graphs (:class:`.graphs.GraphSlot`, empty until a call
            asks for them) on a CUDA device; None elsewhere.
    """

    strategy: str
    result: StrategyResult
    compiled: Any
    output: str
    grad: tuple[int, ...]
    saved_operands: tuple[int, ...]
    new_saved: tuple[str, ...]
    forward_layouts: tuple[Layout, ...]
    gradient_layouts: tuple[Layout, ...]
    output_may_alias: bool = True
    operand_names: tuple[str, ...] = ()
    saved_names: tuple[str, ...] = ()
    gradient_names: tuple[str, ...] = ()
    relayout: Layout | None = None
    equation: str = ""
    runs_torch: bool = False
    compiled_runs_torch: bool = False
    reason: str = ""
    torch_path: tuple[int, ...] | None = None
    graphs: GraphSlot | None = None

    def __post_init__(self) -> None:
        # Names built once: a cache hit formats no string.
        object.__setattr__(self, "saved_names",
                           tuple(f"in{k}" for k in self.saved_operands) + self.new_saved)
        object.__setattr__(self, "gradient_names", tuple(f"d{k}" for k in self.grad))

    def run_forward(self, operands: Sequence[Any]) -> dict[str, Any]:
        """The forward events on contiguous ``operands``; returns the live tensors."""
        names = self.operand_names
        live = (dict(zip(names, operands, strict=True)) if len(names) == len(operands)
                else {f"in{k}": t for k, t in enumerate(operands)})
        if torch.is_grad_enabled():
            with torch.no_grad():
                _run(self.compiled.forward, live)
        else:
            _run(self.compiled.forward, live)  # inside autograd.Function.forward
        if self.relayout is not None:
            live[self.output] = _relaid(live[self.output], self.relayout)
        return live

    def call_torch(self, equation: str, operands: Sequence[Any]) -> torch.Tensor:
        """torch.einsum's own execution: its kernel, on the path it would plan itself.

        torch.einsum plans a path with opt_einsum on every call of three operands or
        more; the plan holds that path, so the call goes straight to the kernel
        (``torch._VF.einsum``). Operands with ``__torch_function__`` go through
        torch.einsum itself.
        """
        if not _has_torch_function(operands):
            path = self.torch_path
            if path is not None:
                return _VF_EINSUM(equation, operands, path=path)
            if len(operands) <= 2:
                return _VF_EINSUM(equation, operands)
        return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]

    def run_backward(self, saved: Sequence[Any], seed: Any) -> list[Any]:
        """The backward events; returns the gradients in ``grad`` order.

        ``seed`` is the upstream gradient, contiguous; the schedule may take it over
        (a copy of the caller's, for a complex dtype, is freed where the schedule frees
        the seed: this frame keeps no reference to it).
        """
        live = dict(zip(self.saved_names, saved, strict=True))
        if isinstance(saved, list):
            saved.clear()  # the live tensors are the only references: freed as scheduled
        live["upstream"] = seed
        del seed
        if torch.is_grad_enabled():
            with torch.no_grad():
                _run(self.compiled.backward, live)
        else:  # autograd runs a node's backward without grad: no mode to switch
            _run(self.compiled.backward, live)
        return [live[name] for name in self.gradient_names]


def _relaid(tensor: Any, layout: Layout) -> Any:
    """``tensor`` copied into torch.einsum's layout (a fresh tensor of ``layout``)."""
    out = torch.empty_strided(layout[0], layout[1], dtype=tensor.dtype, device=tensor.device)
    with torch.no_grad():
        out.copy_(tensor)
    return out


_VF_EINSUM: Callable[..., torch.Tensor] = torch._VF.einsum  # type: ignore[attr-defined]
_has_torch_function: Callable[[Any], bool] = torch.overrides.has_torch_function


def _torch_path(equation: str, shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """The flat path torch.einsum would ask opt_einsum for (as torch.functional.einsum)."""
    from torch.backends import opt_einsum as torch_opt_einsum

    if len(shapes) <= 2 or not torch_opt_einsum.enabled or not torch_opt_einsum.is_available():
        return None
    import opt_einsum

    try:
        path, _ = opt_einsum.contract_path(equation, *shapes, shapes=True,
                                           optimize=torch_opt_einsum.strategy)
    except ValueError:  # torch.einsum reads the call itself, every time
        return None
    return tuple(k for pair in path for k in pair)


def _run(ops: Sequence[Any], live: dict[str, Any]) -> dict[str, Any]:
    """The compiled events on ``live``, as ``run_compiled`` runs them without a hook.

    The caller chooses the grad mode (:func:`einsum_analyze.backends.torch_backend.run_compiled`
    enters ``no_grad`` on every call).
    """
    for op in ops:
        kept = op(live, [])
        if kept:
            live.update(kept)
    return live


def build_plan(equation: str, shapes: tuple[tuple[int, ...], ...], dtype: str,
               mask: tuple[bool, ...], strategy: str, optimize: str,
               budget: int, torch_result: Layout | None = None,
               device: str = "cpu") -> DropinPlan:
    """Choose, compile and lay out one plan (a cache miss).

    ``device`` is the operands' (the choice predicts seconds on its profile);
    ``torch_result`` is torch.einsum's result layout for this call
    (:func:`.calls.torch_layout`); where the schedule's differs, the plan copies its
    result into it.
    """
    from ..backends.torch_backend import run_compiled
    from ..backends.torch_kernels import compile_schedule

    if len(mask) != len(shapes):
        raise AssertionError("one requires-grad flag per operand")
    grad = tuple(k for k, wanted in enumerate(mask) if wanted)
    choice = choose_dropin(equation, shapes, dtype, grad, strategy, optimize, budget, device)
    compiled_torch = choice.runs_torch or (strategy == "auto" and budget == NO_BUDGET)
    result = choice.result
    from ..model.equation import parse_equation

    eq = parse_equation(equation, shapes)
    sizes = result.sizes(eq.size_dict)
    compiled = compile_schedule(result.events, sizes)
    torch_dtype = getattr(torch, dtype)
    operands = [torch.empty(shape, dtype=torch_dtype, device="meta") for shape in shapes]
    live = run_compiled(compiled.forward, {f"in{k}": t for k, t in enumerate(operands)})
    if torch_result is not None and not same_layout(
            torch_result[0], torch_result[1], _layout(live[compiled.output])[1]):
        # torch's layout written by the last step itself, where a kernel can: no copy
        direct = written_in_layout(result, compiled.output, torch_result, sizes, dtype)
        if direct is not None and _fits(direct, budget):
            again = compile_schedule(direct.events, sizes)
            relive = run_compiled(again.forward, {f"in{k}": t for k, t in enumerate(operands)})
            if same_layout(torch_result[0], torch_result[1], _layout(relive[again.output])[1]):
                result, compiled, live = direct, again, relive
    read = {name for e in result.events if e.phase == "backward" for name in e.inputs}
    needed = [name for name in live if name in read and name != compiled.output]
    saved_operands = tuple(sorted(
        int(name[2:]) for name in needed
        if name.startswith("in") and live[name] is operands[int(name[2:])]
    ))
    new_saved = tuple(name for name in needed
                      if not (name.startswith("in") and int(name[2:]) in saved_operands))
    if compiled.output in read:
        raise AssertionError("the drop-in does not support a backward that reads the output")
    relayout = None
    if torch_result is not None and not same_layout(
            torch_result[0], torch_result[1], _layout(live[compiled.output])[1]):
        copied = with_layout_copy(result, compiled.output, dtype, torch_result)
        if _fits(copied, budget):  # a budget binds: the result keeps the schedule's layout
            relayout, result = torch_result, copied
    forward_layouts = ((relayout or _layout(live[compiled.output])),
                       *(_layout(live[name]) for name in new_saved))
    gradient_layouts: tuple[Layout, ...] = ()
    if grad:
        state = {name: live[name] for name in (*(f"in{k}" for k in saved_operands), *new_saved)}
        out = live[compiled.output]
        state["upstream"] = torch.empty(out.shape, dtype=torch_dtype, device="meta")
        run_compiled(compiled.backward, state)
        gradient_layouts = tuple(_layout(state[f"d{k}"]) for k in grad)
    return DropinPlan(strategy=result.name, result=result, compiled=compiled,
                      output=compiled.output, grad=grad, saved_operands=saved_operands,
                      new_saved=new_saved, forward_layouts=forward_layouts,
                      gradient_layouts=gradient_layouts,
                      output_may_alias=(relayout is None
                                        and _reaches_an_operand(result.events, compiled.output)),
                      operand_names=tuple(f"in{k}" for k in range(len(shapes))),
                      relayout=relayout, equation=equation,
                      runs_torch=choice.runs_torch,
                      compiled_runs_torch=compiled_torch,
                      reason=choice.reason + (_COMPILED_REASON if compiled_torch
                                              and not choice.runs_torch else ""),
                      torch_path=_torch_path(equation, shapes) if choice.runs_torch
                      else None)


def _fits(result: StrategyResult, budget: int) -> bool:
    """Whether ``result``'s predicted peak is within ``budget`` (or there is none)."""
    return budget == NO_BUDGET or result.memory.peak_bytes <= budget


_COMPILED_REASON = ("; under torch.compile: torch.einsum, which the compiler lowers and "
                    "fuses (the plan's op is opaque to it)")


def _reaches_an_operand(events: Sequence[Any], name: str) -> bool:
    """Whether the tensor ``name`` is an operand or a chain of views of one."""
    views = {e.tensor: e.inputs[0] for e in events
             if e.phase == "forward" and e.kind == "alloc" and e.op == "view"}
    while name in views:
        name = views[name]
    return name.startswith("in") and name[2:].isdigit()


def _layout(tensor: Any) -> Layout:
    return tuple(tensor.shape), tuple(tensor.stride())


class _Cache:
    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.plans: OrderedDict[tuple[Any, ...], DropinPlan] = OrderedDict()
        # An eager call's key of torch objects (dtype, device, torch.Size) -> the key of
        # ``plans`` and its plan: a cache hit converts nothing to text and hashes one key.
        self.eager: dict[tuple[Any, ...], tuple[tuple[Any, ...], DropinPlan]] = {}
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0


_CACHE = _Cache(256)


def get_plan(equation: str, shapes: tuple[tuple[int, ...], ...], dtype: str, device: str,
             mask: tuple[bool, ...], strategy: str, optimize: str, budget: int) -> DropinPlan:
    """The cached plan for this call, built on a miss.

    Raises:
        DropinError: Bad input (a RuntimeError, as torch.einsum raises).
    """
    key = (equation, shapes, dtype, device, mask, strategy, optimize, budget)
    cache = _CACHE
    with cache.lock:
        plan = cache.plans.get(key)
        if plan is not None:
            cache.hits += 1
            cache.plans.move_to_end(key)
            return plan
        cache.misses += 1
    try:
        # torch.einsum's verdict first: a call it refuses is refused alike, planning nothing
        torch_result = torch_layout(equation, shapes, dtype)
        plan = build_plan(equation, shapes, dtype, mask, strategy, optimize, budget,
                          torch_result, device)
        if device.startswith("cuda"):
            plan = dataclasses.replace(plan, graphs=GraphSlot(key))
    except DropinError:
        raise
    except EinsumAnalyzeError as err:
        raise _input_error(f"einsum(): {err}", equation, shapes) from None
    _LOG.debug("einsum %s %s %s on %s: %s", equation, shapes, dtype, device, plan.reason)
    with cache.lock:
        cache.plans[key] = plan
        cache.plans.move_to_end(key)
        _bound(cache)
    return plan


def eager_plan(fast: tuple[Any, ...]) -> DropinPlan | None:
    """The cached plan of an eager call's key, counted as a hit; None if not known.

    ``fast`` holds the call's equation, options, dtype, device, which operands need
    gradients and their shapes (``torch.Size``), as :mod:`einsum_analyze.torch` builds
    it; :func:`remember_eager` ties it to the plan after a lookup by :func:`get_plan`.
    """
    cache = _CACHE
    entry = cache.eager.get(fast)
    if entry is None:
        return None
    key, plan = entry
    # Without the lock (a third of a hit's cost): one dictionary operation is atomic, and
    # a hit counted by two threads at once may be counted once.
    try:
        cache.plans.move_to_end(key)
    except KeyError:  # dropped since: look it up again
        return None
    cache.hits += 1
    return plan


def remember_eager(fast: tuple[Any, ...], key: tuple[Any, ...], plan: DropinPlan) -> None:
    """Tie an eager call's key to ``plan``, which :func:`get_plan` gave for ``key``."""
    cache = _CACHE
    with cache.lock:
        if len(cache.eager) >= 4 * cache.maxsize:
            cache.eager.clear()  # bounded: several eager keys may find one plan
        cache.eager[fast] = (key, plan)


DTYPE_NAMES: Mapping[torch.dtype, str] = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}


"""The dtypes the drop-in plans for, by the names the analysis reads."""


def plan_key(operands: Sequence[torch.Tensor], equation: str, strategy: str, optimize: str,
              budget: int, mask: Sequence[bool]
              ) -> tuple[str, tuple[tuple[int, ...], ...], str, str, tuple[bool, ...], str,
                         str, int]:
    """The arguments of :func:`get_plan` for this call."""
    if not operands:
        raise DropinError("einsum(): must provide at least one operand")
    first = operands[0]
    dtype = DTYPE_NAMES.get(first.dtype)
    if dtype is None:
        raise DropinError(f"einsum(): dtype {first.dtype} is not supported; use one of "
                          f"{', '.join(DTYPE_NAMES.values())}")
    device = str(first.device)
    shapes = tuple(tuple(t.shape) for t in operands)
    try:
        hash(shapes)
    except TypeError:  # symbolic sizes (a dynamic trace): the plan is for these sizes
        shapes = tuple(tuple(int(s) for s in shape) for shape in shapes)
    return (equation, shapes, dtype, device, tuple(mask), strategy, optimize, budget)


def plan_eager_call(fast: tuple[Any, ...], operands: Sequence[torch.Tensor], equation: str,
                    strategy: str, optimize: str, budget: int,
                    mask: Sequence[bool]) -> DropinPlan:
    """The plan of an eager call that :func:`eager_plan` did not know, remembered for ``fast``.

    Raises:
        DropinError: Bad input (a RuntimeError, as torch.einsum raises).
    """
    key = plan_key(operands, equation, strategy, optimize, budget, mask)
    plan = get_plan(*key)
    remember_eager(fast, key, plan)
    return plan


@torch.compiler.assume_constant_result  # type: ignore[untyped-decorator]
def traced_runs_torch(equation: str, shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype,
                      device: torch.device, mask: tuple[bool, ...], strategy: str,
                      optimize: str, budget: int, compiling: bool,
                      max_plan_s: float | None = None) -> bool:
    """Whether a traced call runs torch.einsum itself.

    Under ``torch.compile`` (``compiling``) its plan's ``compiled_runs_torch``, under
    another tracer its ``runs_torch``. A compiler calls this once while it traces, with
    the call's static sizes, and keeps the answer as a constant: the graph then holds
    torch.einsum, which the compiler lowers as it lowers any torch.einsum, or else the
    custom op of the plan. The arguments are the call's own values, converted here,
    outside the trace, and so is the planning time ``max_plan_s`` (None: the default),
    which a traced call cannot enter as a context.
    """
    name = DTYPE_NAMES.get(dtype)
    if name is None:
        return False  # the custom op raises torch's error
    sizes = tuple(tuple(int(size) for size in shape) for shape in shapes)
    with planning_time(max_plan_s):
        plan = get_plan(equation, sizes, name, str(device), tuple(mask), strategy, optimize,
                        budget)
    return plan.compiled_runs_torch if compiling else plan.runs_torch


def cache_info() -> CacheInfo:
    """Hits, misses, plans held, the bound of the plan cache, and each plan's choice.

    Example:
        After ``einsum("ij,jk->ik", a, b)`` with ``b`` needing a gradient,
        ``cache_info().choices[-1].runs`` is ``"torch.einsum"`` and its ``reason``
        compares the two: ``torch.einsum: no plan is predicted faster ('reverse' ...``.
    """
    with _CACHE.lock:
        choices = tuple(
            PlanChoice(equation=key[0], shapes=key[1], dtype=key[2], device=key[3],
                       grad=plan.grad, runs="torch.einsum" if plan.runs_torch
                       else plan.strategy, reason=plan.reason,
                       compiled="torch.einsum" if plan.compiled_runs_torch
                       else plan.strategy,
                       graphs="" if plan.graphs is None else plan.graphs.describe())
            for key, plan in _CACHE.plans.items()
        )
        return CacheInfo(_CACHE.hits, _CACHE.misses, len(_CACHE.plans), _CACHE.maxsize,
                         choices)


def clear_cache() -> None:
    """Forget every plan and reset the counters."""
    with _CACHE.lock:
        _CACHE.plans.clear()
        _CACHE.eager.clear()
        _CACHE.hits = _CACHE.misses = 0


def set_cache_size(maxsize: int) -> None:
    """Bound the cache to ``maxsize`` plans (at least 1), dropping the least recent."""
    if maxsize < 1:
        raise ValueError("the plan cache holds at least 1 plan")
    with _CACHE.lock:
        _CACHE.maxsize = maxsize
        _bound(_CACHE)


def _bound(cache: _Cache) -> None:
    """Drop the least recent plans past the bound, and the eager keys that find them."""
    dropped: set[tuple[Any, ...]] = set()
    while len(cache.plans) > cache.maxsize:
        dropped.add(cache.plans.popitem(last=False)[0])
    if dropped:
        for fast in [f for f, (key, _) in cache.eager.items() if key in dropped]:
            del cache.eager[fast]
