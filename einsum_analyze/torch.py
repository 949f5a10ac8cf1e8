"""A drop-in ``torch.einsum`` for training: forward and backward run the planned schedule.

``einsum(equation, *operands)`` computes what ``torch.einsum`` computes, as one autograd
node (:mod:`einsum_analyze.training.node`): a ``torch.library.custom_op``
(``einsum_analyze::contract``) whose forward runs the plan's forward events and saves
exactly the tensors the plan retains, and whose backward
(``einsum_analyze::contract_backward``) runs the plan's backward events. Both ops have a
fake implementation, so ``torch.compile(fullgraph=True)`` keeps the plan as it is.

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
from collections.abc import Callable
from contextlib import ContextDecorator
from typing import Any

import torch

from .errors import DropinError
from .training.choice import NO_BUDGET
from .training.node import EagerContract, apply_eager, contract, forward_output
from .training.plans import (
    cache_info,
    clear_cache,
    eager_plan,
    plan_eager_call,
    plan_key,
    set_cache_size,
    torch_einsum,
    traced_runs_torch,
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

_SEQUENCES = (list, tuple)


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
        mask.append(grad_on and t.requires_grad)
    budget_value = NO_BUDGET if budget is None else _budget_bytes(budget)
    if EAGER_FAST_PATH and not torch.compiler.is_compiling():
        # The plan by a key of torch objects: a cache hit converts nothing to text.
        fast = (equation, strategy, optimize, budget_value, dtype, device, *mask,
                *[t.shape for t in operands])
        plan = eager_plan(fast)
        if plan is None:
            plan = plan_eager_call(fast, operands, equation, strategy, optimize,
                                   budget_value, mask)
        if plan.runs_torch:  # no plan of ours is predicted to beat it
            return plan.call_torch(equation, operands)
        tensors = [t if t.is_contiguous() else t.contiguous() for t in operands]
        if not any(mask):
            return forward_output(plan, tensors)
        if _functorch_active is None or _functorch_active():
            result: torch.Tensor = EagerContract.apply(plan, *tensors)  # type: ignore[no-untyped-call]
        else:
            result = apply_eager(plan, *tensors)
        return result
    if traced_runs_torch(*plan_key(operands, equation, strategy, optimize, budget_value,
                                   mask)):
        return torch_einsum(equation, *operands)
    tensors = [t if t.is_contiguous() else t.contiguous() for t in operands]
    outputs: list[torch.Tensor] = contract(tensors, equation, strategy, optimize,
                                           budget_value, mask)
    return outputs[0]


EAGER_FAST_PATH = True
"""Eager calls skip the custom op's dispatch and run the same plan through an
``autograd.Function`` (a few microseconds less per call); traced calls always use the
custom op. Tests set it to False to run eager calls through the op."""


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
    from .model.parsing import parse_byte_budget

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
