"""A drop-in ``torch.einsum`` for training: forward and backward run the planned schedule.

``einsum(equation, *operands)`` computes what ``torch.einsum`` computes, as one autograd
node (:mod:`einsum_analyze.training.node`): a ``torch.library.custom_op``
(``einsum_analyze::contract``) whose forward runs the plan's forward events and saves
exactly the tensors the plan retains, and whose backward
(``einsum_analyze::contract_backward``) runs the plan's backward events. Both ops have a
fake implementation, so ``torch.compile(fullgraph=True)`` keeps the plan as it is where
it traces the op: under ``strategy="auto"`` without a budget a compiled call holds
torch.einsum itself, which the compiler lowers and fuses (docs/dropin.md).

Plans are chosen by :mod:`einsum_analyze.training.choice` and cached by
:mod:`einsum_analyze.training.plans`: a call with the same equation, shapes, dtype,
device, operands needing gradients and options plans nothing. This module is the public
face only: it reads the call, then calls down into those modules.
:func:`patch` routes ``torch.einsum`` through :func:`einsum` inside a scope, and
:class:`Einsum` is an ``nn.Module`` holding one equation and its options.

torch is imported only when this module is imported (``import einsum_analyze`` does
not import it).

Example:
    >>> import torch
    >>> from einsum_analyze.torch import einsum
    >>> a = torch.ones(2, 3, requires_grad=True)
    >>> y = einsum("ij,jk->ik", a, torch.ones(3, 4))
    >>> y.sum().backward()
    >>> a.grad[0, 0].item()
    4.0
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable
from contextlib import ContextDecorator
from typing import Any

import torch
import torch.autograd.forward_ad as _forward_ad
import torch.fx.experimental.symbolic_shapes as _symbolic_shapes

from .errors import DropinError, DropinValueError
from .training.calls import (
    TORCH_EINSUM,
    budget_bytes,
    check_options,
    may_overlap,
    read_call,
    same_layout,
    strided_layout,
)
from .training.choice import NO_BUDGET, check_plan_s, planning_time
from .training.graphs import CudaGraphs, check_cuda_graphs
from .training.node import apply_eager, contract, forward_output, run_graphed
from .training.plans import (
    DTYPE_NAMES,
    cache_info,
    clear_cache,
    eager_plan,
    plan_eager_call,
    set_cache_size,
    traced_runs_torch,
)

__all__ = [
    "DropinError",
    "DropinValueError",
    "Einsum",
    "cache_info",
    "clear_cache",
    "einsum",
    "patch",
    "set_cache_size",
]

def _autocast_dtype(device_type: str) -> torch.dtype | None:
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def einsum(*args: Any, strategy: str = "auto", budget: int | str | None = None,
           optimize: str = "auto", max_plan_s: float | None = None,
           cuda_graphs: CudaGraphs = False) -> torch.Tensor:
    """``torch.einsum(*args)``, forward and backward run by the planned schedule.

    Args:
        args: What torch.einsum takes: an equation and its operands (separately, or as
            one list or tuple), or the sublist format ``x, [0, 1], y, [1, 2], [0, 2]``
            (``Ellipsis`` allowed, the output sublist optional).
        strategy: ``"auto"`` (the recommended plan of :mod:`einsum_analyze.search` where it
            offers one, else ``reverse``; or torch.einsum itself where no plan of ours is
            predicted faster without a higher peak: ``cache_info().choices`` says which)
            or any registered strategy name (``"torch-autograd"`` runs torch.einsum).
        budget: Peak bytes (inputs counted) the plan must fit, e.g. ``"512MiB"``; passed to
            strategies that take a ``budget_bytes`` option. A budget no plan meets raises
            an error giving the smallest reachable peak.
        optimize: The opt_einsum optimizer of the forward path.
        max_plan_s: Seconds the first call of a shape may spend choosing its plan (None:
            0.5): the search then stops and takes the best plan it has found.
        cuda_graphs: Whether eager calls on a CUDA device replay the plan's forward and
            backward as CUDA graphs (:mod:`einsum_analyze.training.graphs`): ``True``
            wherever they can, ``"auto"`` where a replay is predicted faster than what
            the call runs otherwise, ``False`` (the default) never. CPU tensors never
            replay graphs, whatever the option; nor do traced calls.

    Returns:
        The result, as torch.einsum returns it: the same values, dtype and strides.
        Calls the executor does not plan run torch.einsum itself: integer and bool
        operands, mixed dtypes or devices (torch promotes or refuses them), a functorch
        transform, forward-mode AD or ``torch.jit.trace`` in progress, an operand class
        with its own ``__torch_function__``, autocast where torch does not cast einsum's
        operands, a view of an expanded operand.

    Raises:
        RuntimeError, ValueError, TypeError: Where torch.einsum raises them, one line:
            :class:`DropinError` (a RuntimeError) and :class:`DropinValueError` (a
            ValueError) for calls the drop-in reads; a call it cannot read as an equation
            and operands (``einsum("", [])``) goes to torch.einsum and raises its error.
        DropinValueError: A bad ``strategy``, ``budget``, ``optimize``, ``max_plan_s`` or
            ``cuda_graphs``.
    """
    compiling = torch.compiler.is_compiling()
    if max_plan_s is not None:
        check_plan_s(max_plan_s)
        if not compiling:  # traced, a context cannot be entered: the plan's lookup takes it
            with planning_time(max_plan_s):
                return einsum(*args, strategy=strategy, budget=budget, optimize=optimize,
                              cuda_graphs=cuda_graphs)
    if not compiling and (strategy != "auto" or budget is not None or optimize != "auto"):
        check_options(strategy, budget, optimize)  # the defaults need no check
    if cuda_graphs is not False:
        check_cuda_graphs(cuda_graphs)
    if len(args) > 1 and type(args[0]) is str and (len(args) > 2
                                                   or isinstance(args[1], torch.Tensor)):
        equation, operands = args[0], args[1:]  # the common form, read without a call
    else:
        call = read_call(args)
        if call is None:
            return TORCH_EINSUM(*args)  # type: ignore[no-any-return]
        equation, operands = call
    first = operands[0]
    if not isinstance(first, torch.Tensor):
        return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]  # TypeError
    if not compiling and ((_functorch_active is not None and _functorch_active())
                          or _forward_ad._current_level >= 0  # noqa: SLF001 - a dual level
                          or (type(first) is not torch.Tensor and _overrides(type(first)))
                          or _jit_tracing() is not None):
        return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
    device, dtype = first.device, first.dtype
    given = operands  # before autocast's cast: what a double backward differentiates
    if _any_autocast is None or _any_autocast():
        for t in operands:
            if not isinstance(t, torch.Tensor):
                return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
        low = _autocast_dtype(device.type)
        if low is not None:
            if not compiling and not _autocast_casts_einsum(device.type, low):
                return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
            operands = tuple(t.to(low) if t.is_floating_point() and t.dtype != torch.float64
                             else t for t in operands)
            dtype = operands[0].dtype
    grad_on = torch.is_grad_enabled()
    head = operands[0]  # a tensor of the call's dtype and device: the others are checked
    mask: list[bool] = [grad_on and head.requires_grad]
    shapes: list[Any] = [head.shape]
    for t in operands[1:]:  # one loop: kinds, dtypes, devices, gradients and shapes
        if not isinstance(t, torch.Tensor) or t.dtype is not dtype or t.device != device or (
                type(t) is not torch.Tensor and not compiling and _overrides(type(t))):
            return TORCH_EINSUM(equation, *given)  # type: ignore[no-any-return]  # torch's way
        mask.append(grad_on and t.requires_grad)
        shapes.append(t.shape)
    if dtype not in DTYPE_NAMES:
        return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
    if EAGER_FAST_PATH and not compiling:
        # The plan by a key of torch objects and the options as given: a cache hit
        # converts nothing to text and parses no budget.
        fast = (equation, strategy, optimize, budget, dtype, device, *mask, *shapes)
        plan = eager_plan(fast)
        if plan is None:
            plan = plan_eager_call(fast, operands, equation, strategy, optimize,
                                   NO_BUDGET if budget is None else budget_bytes(budget),
                                   mask)
        graphed = cuda_graphs is not False and plan.graphs is not None
        if plan.runs_torch and not graphed:  # no plan of ours is predicted to beat it
            return plan.call_torch(equation, operands)
        tensors = [t if t.is_contiguous() else t.contiguous() for t in operands]
        result = run_graphed(plan, cuda_graphs, given, tensors, any(mask)) if graphed else None
        if result is None:
            if plan.runs_torch:
                return plan.call_torch(equation, operands)
            result = forward_output(plan, tensors) if not any(mask) else apply_eager(
                plan, given, *tensors)
        for t, made in zip(operands, tensors, strict=True):  # a loop: no generator on the hot path
            if t is not made:
                return _strided_like_torch(result, equation, operands)
        return result
    budget_value = NO_BUDGET if budget is None else budget_bytes(budget)
    sizes = tuple(tuple(shape) for shape in shapes)
    if compiling and not all(_static_size(n) for shape in sizes for n in shape):
        # Symbolic sizes (dynamic=True, or a recompile on a new shape: automatic dynamic):
        # auto without a budget holds torch.einsum for any sizes; a plan is for the
        # sizes of this call, which are then guarded (the graph is recompiled for others).
        if strategy == "auto" and budget is None:
            return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
        sizes = tuple(tuple(operator.index(n) for n in shape) for shape in sizes)
    if traced_runs_torch(equation, sizes, dtype, device, tuple(mask), strategy, optimize,
                         budget_value, compiling, max_plan_s):
        return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
    tensors = [t if t.is_contiguous() else t.contiguous() for t in operands]
    outputs: list[torch.Tensor] = contract(tensors, equation, strategy, optimize,
                                           budget_value, mask)
    if not compiling and any(t is not made for t, made in zip(operands, tensors, strict=True)):
        return _strided_like_torch(outputs[0], equation, operands)
    return outputs[0]


def _strided_like_torch(result: torch.Tensor, equation: str,
                        operands: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``result``, copied into torch.einsum's layout for these non-contiguous operands.

    The plan's layout is torch's for contiguous operands; torch's result follows its
    operands' strides where it is a view of one or an elementwise product, so that
    ``ij->ji`` of a transposed operand is contiguous there. The copy is differentiable
    and is not in the plan's model (nor are the operands' contiguous copies). Where
    torch's result is a view whose elements share addresses (``ij->ij`` of an expanded
    operand, stride 0), no copy takes that layout: the call is torch.einsum's own.
    """
    shape, strides = strided_layout(equation, tuple(tuple(t.shape) for t in operands),
                                    tuple(t.stride() for t in operands), operands[0].dtype)
    if same_layout(shape, result.stride(), strides):
        return result
    if may_overlap(shape, strides):
        return TORCH_EINSUM(equation, *operands)  # type: ignore[no-any-return]
    relaid = torch.empty_strided(shape, strides, dtype=result.dtype, device=result.device)
    return relaid.copy_(result)


def _overrides(cls: type) -> bool:
    """Whether an operand class (not ``torch.Tensor``) defines a ``__torch_function__``.

    torch.einsum hands such a call to it (a subclass may compute einsum its own way), so
    the drop-in leaves the call to torch.einsum. Plain subclasses (torch's default
    ``__torch_function__``, or none, as ``nn.Parameter`` and the tracers' tensors) do not.
    """
    known = _OVERRIDES.get(cls)
    if known is None:
        impl = getattr(cls, "__torch_function__", None)
        known = _OVERRIDES[cls] = impl is not None and (
            impl is not torch._C._disabled_torch_function_impl  # noqa: SLF001
            and getattr(impl, "__func__", None) is not _TENSOR_TORCH_FUNCTION)
    return known


_TENSOR_TORCH_FUNCTION = torch.Tensor.__torch_function__.__func__  # type: ignore[attr-defined]
_OVERRIDES: dict[type, bool] = {}
"""Whether each operand class met so far defines its own ``__torch_function__``."""


_AUTOCASTS_EINSUM: dict[tuple[str, torch.dtype], bool] = {}


def _autocast_casts_einsum(device_type: str, low: torch.dtype) -> bool:
    """Whether autocast on ``device_type`` casts einsum's operands to ``low`` itself.

    Asked once per device type and dtype, of torch.einsum on two one-element operands
    under the caller's autocast: an outer product runs no matrix product, so its
    result is ``low`` only where autocast casts einsum's own operands (the drop-in then
    casts as it does); elsewhere the drop-in leaves autocast calls to torch.einsum.
    """
    key = (device_type, low)
    known = _AUTOCASTS_EINSUM.get(key)
    if known is None:
        probe = torch.ones(1, device=device_type)
        known = TORCH_EINSUM("i,j->ij", probe, probe).dtype == low
        _AUTOCASTS_EINSUM[key] = known
    return known


_static_size: Callable[[Any], bool] = getattr(_symbolic_shapes, "has_static_value",
                                              lambda size: True)
"""Whether a size is a constant while torch.compile traces (False: a symbolic size of a
dynamic trace; torch.compile reads the answer as a constant)."""


EAGER_FAST_PATH = True
"""Eager calls skip the custom op's dispatch and run the same plan through an
``autograd.Function`` (a few microseconds less per call); traced calls always use the
custom op. Tests set it to False to run eager calls through the op."""


_any_autocast: Callable[[], bool] | None = getattr(torch._C, "_is_any_autocast_enabled", None)
"""Whether autocast is on for any device type (one call, where the per-device question
parses its argument); None: this torch cannot say, and the device's is asked."""

_jit_tracing: Callable[[], Any] = torch._C._get_tracing_state  # noqa: SLF001
"""The TorchScript tracer's state (``torch.jit.trace``; None: not tracing), which records
torch.einsum itself and cannot record the plan's node."""

_functorch_active: Callable[[], bool] | None = getattr(
    torch._C, "_are_functorch_transforms_active", None)
"""Whether a functorch transform (vmap, grad, ...) is active (the drop-in then runs
torch.einsum); None: this torch cannot say."""


class patch(ContextDecorator):  # noqa: N801 - used as a function: ``with patch():``
    """Route ``torch.einsum`` through :func:`einsum` inside a scope.

    A context manager and a decorator; the options are those of :func:`einsum`.
    ``torch.einsum`` is one attribute of the process: while any scope is open, in any
    thread, every call of ``torch.einsum`` in every thread is routed. A call takes the
    options of the innermost scope its own thread opened, else those of the scope
    opened last. Scopes may be nested and may close in any order, in any thread;
    ``torch.einsum`` is restored when the last one closes.

    Example:
        >>> import torch
        >>> original = torch.einsum
        >>> with patch():
        ...     torch.einsum is original
        False
        >>> torch.einsum is original
        True
    """

    def __init__(self, *, strategy: str = "auto", budget: int | str | None = None,
                 optimize: str = "auto", max_plan_s: float | None = None,
                 cuda_graphs: CudaGraphs = False) -> None:
        check_options(strategy, budget, optimize)
        check_plan_s(max_plan_s)
        check_cuda_graphs(cuda_graphs)
        options: dict[str, Any] = {name: value for name, value, default in (
            ("strategy", strategy, "auto"), ("budget", budget, None),
            ("optimize", optimize, "auto"), ("max_plan_s", max_plan_s, None),
            ("cuda_graphs", cuda_graphs, False)) if value is not default}
        # What a routed call runs: the drop-in itself where every option is its default
        # (no keywords to pass on the hot path), else a partial of it with the options.
        self._call: Callable[..., torch.Tensor] = (
            functools.partial(einsum, **options) if options else einsum)

    def __enter__(self) -> patch:
        import torch.functional

        entry = (self, threading.get_ident())
        with _PATCH_LOCK:
            global _SCOPES
            if not _SCOPES:
                _REPLACED[:] = [torch.einsum, torch.functional.einsum]
                torch.einsum = _routed
                torch.functional.einsum = _routed
            _SCOPES = (*_SCOPES, entry)
        return self

    def __exit__(self, *exc: object) -> None:
        import torch.functional

        me = threading.get_ident()
        with _PATCH_LOCK:
            global _SCOPES
            scopes = list(_SCOPES)
            mine = [k for k, (scope, thread) in enumerate(scopes) if scope is self]
            if not mine:
                return
            ours = [k for k in mine if scopes[k][1] == me]
            del scopes[(ours or mine)[-1]]
            _SCOPES = tuple(scopes)
            if not _SCOPES:
                torch.einsum, torch.functional.einsum = _REPLACED
                _REPLACED.clear()


_PATCH_LOCK = threading.Lock()
_SCOPES: tuple[tuple[patch, int], ...] = ()
"""The open :class:`patch` scopes and the threads that opened them, oldest first (a
tuple, replaced whole under the lock, so that a routed call reads it without one)."""
_REPLACED: list[Any] = []
"""``torch.einsum`` and ``torch.functional.einsum`` as they were when the first open
scope opened."""


@functools.wraps(TORCH_EINSUM)
def _routed(*args: Any) -> torch.Tensor:
    scopes = _SCOPES
    if len(scopes) == 1:  # the usual case: one scope open, whichever thread opened it
        return scopes[0][0]._call(*args)  # noqa: SLF001
    if not scopes:  # a reference kept past the last scope
        return TORCH_EINSUM(*args)  # type: ignore[no-any-return]
    me = threading.get_ident()
    chosen = next((scope for scope, thread in reversed(scopes) if thread == me),
                  scopes[-1][0])
    return chosen._call(*args)  # noqa: SLF001


class Einsum(torch.nn.Module):
    """An ``nn.Module`` computing one einsum with the drop-in (no parameters).

    Example:
        >>> import torch
        >>> layer = Einsum("bi,ij->bj")
        >>> layer(torch.ones(2, 3), torch.ones(3, 4)).shape
        torch.Size([2, 4])
    """

    def __init__(self, equation: str, *, strategy: str = "auto",
                 budget: int | str | None = None, optimize: str = "auto",
                 max_plan_s: float | None = None, cuda_graphs: CudaGraphs = False) -> None:
        super().__init__()
        check_options(strategy, budget, optimize)
        check_plan_s(max_plan_s)
        check_cuda_graphs(cuda_graphs)
        self.equation = equation
        self.strategy = strategy
        self.budget = budget
        self.optimize = optimize
        self.max_plan_s = max_plan_s
        self.cuda_graphs = cuda_graphs

    def forward(self, *operands: torch.Tensor) -> torch.Tensor:
        """The einsum of ``operands``."""
        return einsum(self.equation, *operands, strategy=self.strategy, budget=self.budget,
                      optimize=self.optimize, max_plan_s=self.max_plan_s,
                      cuda_graphs=self.cuda_graphs)

    def extra_repr(self) -> str:
        """The equation and strategy, for ``print(module)``."""
        return f"{self.equation!r}, strategy={self.strategy!r}"
