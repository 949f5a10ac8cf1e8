"""A drop-in ``torch.einsum`` for training: forward and backward run the planned schedule.

``einsum(equation, *operands)`` computes what ``torch.einsum`` computes, as one autograd
node: a ``torch.library.custom_op`` (``einsum_analyze::contract``) whose forward runs the
plan's forward events and saves exactly the tensors the plan retains, and whose backward
(``einsum_analyze::contract_backward``) runs the plan's backward events. Both ops have a
fake implementation, so ``torch.compile(fullgraph=True)`` keeps the plan as it is.

Plans are cached (:mod:`einsum_analyze.dropin_plans`): a call with the same equation,
shapes, dtype, device, operands needing gradients and options plans nothing.
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
from collections.abc import Callable, Sequence
from contextlib import ContextDecorator
from typing import Any, TypeVar

import torch

from .dropin_plans import (
    NO_BUDGET,
    DropinError,
    DropinPlan,
    cache_info,
    clear_cache,
    eager_plan,
    get_plan,
    remember_eager,
    set_cache_size,
)

__all__ = [
    "DropinError",
    "Einsum",
    "cache_info",
    "clear_cache",
    "einsum",
    "patch",
    "set_cache_size",
]

_F = TypeVar("_F", bound=Callable[..., Any])
_SEQUENCES = (list, tuple)

_DTYPES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}


def _plan_for(operands: Sequence[torch.Tensor], equation: str, strategy: str, optimize: str,
              budget: int, mask: Sequence[bool]) -> DropinPlan:
    return get_plan(*_plan_key(operands, equation, strategy, optimize, budget, mask))


def _plan_key(operands: Sequence[torch.Tensor], equation: str, strategy: str, optimize: str,
              budget: int, mask: Sequence[bool]
              ) -> tuple[str, tuple[tuple[int, ...], ...], str, str, tuple[bool, ...], str,
                         str, int]:
    """The arguments of :func:`get_plan` for this call."""
    if not operands:
        raise DropinError("einsum(): must provide at least one operand")
    first = operands[0]
    dtype = _DTYPES.get(first.dtype)
    if dtype is None:
        raise DropinError(f"einsum(): dtype {first.dtype} is not supported; use one of "
                          f"{', '.join(_DTYPES.values())}")
    device = str(first.device)
    shapes = tuple(tuple(t.shape) for t in operands)
    try:
        hash(shapes)
    except TypeError:  # symbolic sizes (a dynamic trace): the plan is for these sizes
        shapes = tuple(tuple(int(s) for s in shape) for shape in shapes)
    return (equation, shapes, dtype, device, tuple(mask), strategy, optimize, budget)


def _is_complex_dtype(dtype: torch.dtype) -> bool:
    return dtype in (torch.complex64, torch.complex128)


def _own(tensor: torch.Tensor, others: Sequence[torch.Tensor]) -> torch.Tensor:
    """``tensor``, or a copy where it shares storage with one of ``others``.

    A custom op's outputs may not alias its inputs.
    """
    ptr = tensor.untyped_storage().data_ptr()
    if any(o.untyped_storage().data_ptr() == ptr for o in others):
        return tensor.clone()
    return tensor


@torch.library.custom_op("einsum_analyze::contract", mutates_args=())
def _contract(operands: list[torch.Tensor], equation: str, strategy: str, optimize: str,
              budget: int, mask: list[bool]) -> list[torch.Tensor]:
    plan = _plan_for(operands, equation, strategy, optimize, budget, mask)
    live = plan.run_forward(operands)
    out = _own(live[plan.output], operands)
    return [out, *(live[name] for name in plan.new_saved)]


@_contract.register_fake
def _contract_fake(operands: list[torch.Tensor], equation: str, strategy: str,
                   optimize: str, budget: int, mask: list[bool]) -> list[torch.Tensor]:
    plan = _plan_for(operands, equation, strategy, optimize, budget, mask)
    dtype, device = operands[0].dtype, operands[0].device
    return [torch.empty_strided(shape, stride, dtype=dtype, device=device)
            for shape, stride in plan.forward_layouts]


@torch.library.custom_op("einsum_analyze::contract_backward", mutates_args=())
def _contract_backward(upstream: torch.Tensor, saved: list[torch.Tensor], equation: str,
                       strategy: str, optimize: str, budget: int, mask: list[bool],
                       shapes: list[int]) -> list[torch.Tensor]:
    plan = _plan_for_backward(upstream, equation, strategy, optimize, budget, mask, shapes)
    return [_own(g, [upstream, *saved]) for g in _run_backward(plan, upstream, list(saved))]


def _plan_for_backward(upstream: torch.Tensor, equation: str, strategy: str, optimize: str,
                       budget: int, mask: Sequence[bool], shapes: Sequence[int]) -> DropinPlan:
    return get_plan(equation, _unflatten(shapes), _DTYPES[upstream.dtype],
                    str(upstream.device), tuple(mask), strategy, optimize, budget)


def _run_backward(plan: DropinPlan, upstream: torch.Tensor,
                  saved: list[torch.Tensor]) -> list[torch.Tensor]:
    """The planned backward; ``saved`` is emptied (the schedule owns its tensors)."""
    seed = upstream.contiguous()
    if seed is upstream and seed.is_complex():
        seed = seed.clone()  # the seed is conjugated in place (backward's conjugated space)
    held = list(saved)
    saved.clear()
    return plan.run_backward(held, seed)


@_contract_backward.register_fake
def _contract_backward_fake(upstream: torch.Tensor, saved: list[torch.Tensor], equation: str,
                            strategy: str, optimize: str, budget: int, mask: list[bool],
                            shapes: list[int]) -> list[torch.Tensor]:
    plan = _plan_for_backward(upstream, equation, strategy, optimize, budget, mask, shapes)
    return [torch.empty_strided(shape, stride, dtype=upstream.dtype, device=upstream.device)
            for shape, stride in plan.gradient_layouts]


def _flatten(shapes: Sequence[Sequence[int]]) -> list[int]:
    """Shapes as one list of ints (a custom op's schema has no nested lists)."""
    flat: list[int] = []
    for shape in shapes:
        flat.append(len(shape))
        flat.extend(shape)
    return flat


def _unflatten(flat: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    shapes: list[tuple[int, ...]] = []
    position = 0
    while position < len(flat):
        rank = int(flat[position])
        shapes.append(tuple(int(s) for s in flat[position + 1:position + 1 + rank]))
        position += 1 + rank
    return tuple(shapes)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: list[torch.Tensor]) -> None:
    operands, equation, strategy, optimize, budget, mask = inputs
    plan = _plan_for(operands, equation, strategy, optimize, budget, mask)
    saved = [operands[k] for k in plan.saved_operands] + list(output[1:])
    ctx.mark_non_differentiable(*output[1:])
    ctx.set_materialize_grads(False)
    ctx.options = (equation, strategy, optimize, budget, list(mask))
    ctx.shapes = _flatten([t.shape for t in operands])
    ctx.count = len(operands)
    if _tracing(output[0]):
        ctx.save_for_backward(*saved)
        ctx.held = None
    else:
        # Eager: the node holds the saved tensors in a list that backward empties, so
        # that the schedule frees each one when its last reader is done (tensors saved
        # with save_for_backward would live until the whole backward returns).
        ctx.held = [saved]


def _tracing(tensor: torch.Tensor) -> bool:
    """Whether a compiler is tracing: save as compilers require.

    Eager tensors are plain ``torch.Tensor`` (or parameters); a tracer's are subclasses
    (fake, functional, proxy), and so are user subclasses, which take the same path.
    """
    return torch.compiler.is_compiling() or type(tensor) not in (torch.Tensor,
                                                                 torch.nn.Parameter)


def _backward(ctx: Any, grads: list[torch.Tensor | None]) -> tuple[Any, ...]:
    nones = (None,) * 5
    upstream = grads[0]
    equation, strategy, optimize, budget, mask = ctx.options
    if upstream is None or not any(mask):
        return ([None] * ctx.count, *nones)
    if ctx.held is None:
        saved = list(ctx.saved_tensors)
    elif ctx.held:
        saved = ctx.held.pop()
    else:
        raise DropinError(
            "einsum_analyze.torch.einsum: backward ran twice through the same graph; its "
            "saved tensors are freed after the first (use torch.einsum to retain the graph)"
        )
    if torch.is_grad_enabled() and (upstream.requires_grad or any(t.requires_grad for t in saved)):
        raise DropinError(
            "einsum_analyze.torch.einsum does not support double backward (create_graph=True); "
            "use torch.einsum for higher-order gradients"
        )
    if ctx.held is None:
        computed = _contract_backward(upstream, saved, equation, strategy, optimize, budget,
                                      mask, ctx.shapes)
    else:
        plan = _plan_for_backward(upstream, equation, strategy, optimize, budget, mask,
                                  ctx.shapes)
        computed = _run_backward(plan, upstream, saved)
    flow = iter(computed)
    return ([next(flow) if wanted else None for wanted in mask], *nones)


_contract.register_autograd(_backward, setup_context=_setup_context)


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def einsum(equation: str, *operands: Any, strategy: str = "auto", budget: int | str | None = None,
           optimize: str = "auto") -> torch.Tensor:
    """``torch.einsum(equation, *operands)``, forward and backward run by the planned schedule.

    Args:
        equation: The einsum, as torch.einsum reads it (ellipsis, broadcasting, implicit
            output, repeated and private labels).
        operands: The tensors (or one list of them, as torch.einsum accepts).
        strategy: ``"auto"`` (the recommended plan of :mod:`einsum_analyze.search` where it
            offers one, else ``reverse``) or any registered strategy name.
        budget: Peak bytes (inputs counted) the plan must fit, e.g. ``"512MiB"``; passed to
            strategies that take a ``budget_bytes`` option. A budget no plan meets raises
            an error giving the smallest reachable peak.
        optimize: The opt_einsum optimizer of the forward path.

    Returns:
        The result, as torch.einsum returns it.

    Raises:
        RuntimeError: Bad equations, operand counts or shapes, mixed devices or dtypes
            (as torch.einsum raises), with a one-line message.
    """
    if len(operands) == 1 and isinstance(operands[0], _SEQUENCES):
        operands = tuple(operands[0])
    if not operands:
        raise DropinError("einsum(): must provide at least one operand")
    first = operands[0]
    device, dtype = first.device, first.dtype
    if _any_autocast is None or _any_autocast():
        low = _autocast_dtype(device.type)
        if low is not None and all(t.is_floating_point() for t in operands):
            operands = tuple(t.to(low) for t in operands)
            dtype = low
    grad_on = torch.is_grad_enabled()
    tensors: list[torch.Tensor] = []
    mask: list[bool] = []
    for t in operands:
        if t.device != device:
            raise DropinError(
                "einsum(): expected all operands on one device, got "
                + ", ".join(dict.fromkeys(str(t.device) for t in operands))
            )
        if t.dtype != dtype:
            raise DropinError(
                "einsum(): expected all operands of one dtype, got "
                + ", ".join(dict.fromkeys(str(t.dtype) for t in operands))
                + " (convert them, or use torch.autocast)"
            )
        tensors.append(t if t.is_contiguous() else t.contiguous())
        mask.append(grad_on and t.requires_grad)
    budget_value = NO_BUDGET if budget is None else _budget_bytes(budget)
    if EAGER_FAST_PATH and not torch.compiler.is_compiling():
        # The plan by a key of torch objects: a cache hit converts nothing to text.
        fast = (equation, strategy, optimize, budget_value, dtype, device, *mask,
                *[t.shape for t in tensors])
        plan = eager_plan(fast)
        if plan is None:
            key = _plan_key(tensors, equation, strategy, optimize, budget_value, mask)
            plan = get_plan(*key)
            remember_eager(fast, key, plan)
        if not any(mask):
            return _forward_output(plan, tensors)
        if _functorch_active is None or _functorch_active():
            result: torch.Tensor = _EagerContract.apply(plan, *tensors)  # type: ignore[no-untyped-call]
        else:
            result = _apply_eager(plan, *tensors)
        return result
    outputs: list[torch.Tensor] = _contract(tensors, equation, strategy, optimize,
                                            budget_value, mask)
    return outputs[0]


EAGER_FAST_PATH = True
"""Eager calls skip the custom op's dispatch and run the same plan through an
``autograd.Function`` (a few microseconds less per call); traced calls always use the
custom op. Tests set it to False to run eager calls through the op."""


def _forward_output(plan: DropinPlan, operands: Sequence[torch.Tensor]) -> torch.Tensor:
    out: torch.Tensor = plan.run_forward(operands)[plan.output]
    return _own(out, operands) if plan.output_may_alias else out


class _EagerContract(torch.autograd.Function):
    """The op's eager twin: the same plan, forward and backward, as one autograd node."""

    @staticmethod
    def forward(ctx: Any, plan: DropinPlan, *operands: torch.Tensor) -> torch.Tensor:
        live = plan.run_forward(operands)
        out: torch.Tensor = live[plan.output]
        if plan.output_may_alias:
            out = _own(out, operands)
        ctx.plan = plan
        ctx.held = [[live[name] for name in plan.saved_names]]
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    def backward(ctx: Any, upstream: torch.Tensor | None) -> tuple[Any, ...]:
        plan: DropinPlan = ctx.plan
        if upstream is None:
            return (None,) * len(ctx.needs_input_grad)
        if not ctx.held:
            raise DropinError(
                "einsum_analyze.torch.einsum: backward ran twice through the same graph; "
                "its saved tensors are freed after the first (use torch.einsum to retain "
                "the graph)"
            )
        saved = ctx.held.pop()
        if torch.is_grad_enabled():
            raise DropinError(
                "einsum_analyze.torch.einsum does not support double backward "
                "(create_graph=True); use torch.einsum for higher-order gradients"
            )
        seed = upstream.contiguous()
        if seed is upstream and seed.is_complex():
            seed = seed.clone()  # the seed is conjugated in place (backward's conjugated space)
        gradients = plan.run_backward(saved, seed)  # empties ``saved``: freed as scheduled
        if len(gradients) == len(plan.operand_names):
            return (None, *gradients)  # the plan's slot, then every operand's
        returned: list[Any] = [None] * len(ctx.needs_input_grad)
        for k, gradient in zip(plan.grad, gradients, strict=True):
            returned[k + 1] = gradient
        return tuple(returned)


_apply_eager: Callable[..., torch.Tensor] = getattr(
    super(torch.autograd.Function, _EagerContract), "apply", _EagerContract.apply)
"""``autograd.Function.apply`` without its Python wrapper, which binds default arguments
(the node has none) and unwraps functorch's dead wrappers (none outside a functorch
transform, where :func:`einsum` calls the wrapper): a microsecond less per call."""

_any_autocast: Callable[[], bool] | None = getattr(torch._C, "_is_any_autocast_enabled", None)
"""Whether autocast is on for any device type (one call, where the per-device question
parses its argument); None: this torch cannot say, and the device's is asked."""

_functorch_active: Callable[[], bool] | None = getattr(
    torch._C, "_are_functorch_transforms_active", None)
"""Whether a functorch transform (vmap, grad, ...) is active; None: this torch cannot say,
and every call goes through the wrapper."""


def _budget_bytes(budget: int | str | None) -> int:
    if budget is None:
        return NO_BUDGET
    from .parsing import parse_byte_budget

    try:
        value = parse_byte_budget(budget, "budget")
    except Exception as err:  # a BudgetError: one line
        raise DropinError(f"einsum(): {err}") from err
    if value < 1:  # as analyze(budget=) says; 0 must not read as "no budget"
        raise DropinError(f"einsum(): budget {budget!r} must be a size above 0 B, such as "
                          "512MiB")
    return value


class patch(ContextDecorator):  # noqa: N801 - used as a function: ``with patch():``
    """Route ``torch.einsum`` through :func:`einsum` inside a scope.

    A context manager and a decorator; the options are those of :func:`einsum`.
    Nesting is allowed; leaving the outermost scope restores ``torch.einsum``.

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
                 optimize: str = "auto") -> None:
        self._strategy = strategy
        self._budget = budget
        self._optimize = optimize
        self._saved: list[Any] = []

    def __enter__(self) -> patch:
        import torch.functional

        original = torch.einsum
        strategy, budget, optimize = self._strategy, self._budget, self._optimize

        @functools.wraps(original)
        def routed(equation: str, *operands: Any) -> torch.Tensor:
            return einsum(equation, *operands, strategy=strategy, budget=budget,
                          optimize=optimize)

        self._saved.append((torch.einsum, torch.functional.einsum))
        torch.einsum = routed
        torch.functional.einsum = routed
        return self

    def __exit__(self, *exc: object) -> None:
        import torch.functional

        torch.einsum, torch.functional.einsum = self._saved.pop()


class Einsum(torch.nn.Module):
    """An ``nn.Module`` computing one einsum with the drop-in (no parameters).

    Example:
        >>> import torch
        >>> layer = Einsum("bi,ij->bj")
        >>> layer(torch.ones(2, 3), torch.ones(3, 4)).shape
        torch.Size([2, 4])
    """

    def __init__(self, equation: str, *, strategy: str = "auto",
                 budget: int | str | None = None, optimize: str = "auto") -> None:
        super().__init__()
        self.equation = equation
        self.strategy = strategy
        self.budget = budget
        self.optimize = optimize

    def forward(self, *operands: torch.Tensor) -> torch.Tensor:
        """The einsum of ``operands``."""
        return einsum(self.equation, *operands, strategy=self.strategy, budget=self.budget,
                      optimize=self.optimize)

    def extra_repr(self) -> str:
        """The equation and strategy, for ``print(module)``."""
        return f"{self.equation!r}, strategy={self.strategy!r}"
