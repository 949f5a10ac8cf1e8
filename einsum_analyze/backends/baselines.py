"""The torch baselines, run under autograd: what users do today.

- ``torch-autograd``: ``torch.einsum`` on the equation as typed (relabelled with ASCII
  letters when it has other labels; with more than torch.einsum's 52, torch.einsum per
  pairwise step of opt_einsum's path, each relabelled).
- ``opt_einsum-torch``: ``opt_einsum.contract`` on the report's path, backend torch
  (opt_einsum relabels every pairwise step); a step wider than 52 labels is contracted
  by :func:`.relabel.contract_along_path` instead.

A run that is not the usual call says so in its ``note``.

Memory: the allocator's peak (cpu: torch.profiler's allocator events; CUDA:
``max_memory_allocated``) and the bytes autograd saves for backward
(``saved_tensors_hooks``). The measured call makes the upstream gradient between forward
and backward and holds it until backward returns, as a caller does; our executor's runs
do the same, and its seed reads that tensor in place (docs/method.md section 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .base import DeviceContext, PendingRun, Run, relative_error
from .relabel import TORCH_LABELS, contract_along_path, torch_equation, widest_step
from .timing import prepare

__all__ = ["BASELINES", "prepare_baseline"]

BASELINES = ("torch-autograd", "opt_einsum-torch")
"""torch.einsum under autograd; opt_einsum.contract on the report's path under autograd."""


def _contraction(name: str, text: str, explicit: str, shapes: Sequence[Sequence[int]],
                 path: Sequence[Sequence[int]]) -> tuple[Callable[..., Any], str | None]:
    """The baseline's contraction, and a note when it is not the usual call."""
    import torch

    if name == "torch-autograd":
        equation = torch_equation(text, explicit)
        if equation is not None:
            def einsum(*tensors: Any) -> Any:
                return torch.einsum(equation, *tensors)

            note = None if equation == text else f"torch.einsum({equation!r}): labels relabelled"
            return einsum, note

        def pairwise(*tensors: Any) -> Any:
            return contract_along_path(explicit, tensors)

        return pairwise, ("over 52 labels, more than one torch.einsum call can take: "
                          "torch.einsum per pairwise step of opt_einsum's 'auto' path, "
                          "each step relabelled")
    if name != "opt_einsum-torch":
        raise ValueError(f"unknown baseline {name!r}; choose one of: {', '.join(BASELINES)}")
    steps = [tuple(step) for step in path]
    if widest_step(explicit, shapes, steps) > len(TORCH_LABELS):
        def wide(*tensors: Any) -> Any:
            return contract_along_path(explicit, tensors, steps)

        return wide, ("a step has over 52 labels, more than torch.einsum takes: the "
                      "report's path contracted step by step, wide steps with one bmm")
    import opt_einsum

    equation = text if text.isascii() else explicit

    def contract(*tensors: Any) -> Any:
        return opt_einsum.contract(equation, *tensors, optimize=steps, backend="torch")

    return contract, None


def prepare_baseline(
    name: str,
    context: DeviceContext,
    *,
    text: str,
    explicit: str,
    path: Sequence[Sequence[int]],
    peak_bytes_predicted: int | None,
    retained_bytes_predicted: int | None,
    warmup: int,
) -> PendingRun:
    """Run a torch baseline under autograd, untimed: check its gradients, measure it.

    Its forward and backward are warmed up, to be timed in rounds beside the other runs
    (:func:`.base.time_together`); a baseline that fails comes back skipped, with no
    timers.

    Args:
        name: One of :data:`BASELINES`.
        context: Operands, upstream gradient and oracle on the device.
        text: The equation as typed.
        explicit: The normalised explicit equation.
        path: The report's forward path (for ``opt_einsum-torch``).
        peak_bytes_predicted: The torch-autograd model's peak, inputs included.
        retained_bytes_predicted: The model's retained bytes.
        warmup: Untimed calls first.
    """
    import torch

    from .torch_backend import CPU_BASIS, CUDA_BASIS, allocator_peak_cpu, emptied_cache

    grad = context.grad
    device = context.device
    input_storages = {t.untyped_storage().data_ptr() for t in context.operands}

    def leaves() -> list[Any]:
        return [t.detach().requires_grad_(k in grad) for k, t in enumerate(context.operands)]

    saved: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in input_storages:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    try:
        shapes = [tuple(t.shape) for t in context.operands]
        contract, note = _contraction(name, text, explicit, shapes, path)

        def once() -> tuple[Any, ...]:
            saved.clear()
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(
                    pack, lambda t: t):
                ops = leaves()
                y = contract(*ops)
            if not grad:
                return ()
            # The caller's upstream gradient, made between the phases and held until
            # backward returns: our executor's runs make and hold theirs the same way
            # (TorchExecutor.prepare_backward), so both peaks count it alike.
            upstream = context.upstream.clone().reshape(y.shape)
            return tuple(torch.autograd.grad(y, [ops[k] for k in grad], upstream))

        if context.is_cuda:
            index = torch.device(device).index or 0
            once()  # lazily created library handles belong to the baseline
            context.fence()
            emptied_cache()  # as for our plans: blocks carved from fresh segments
            torch.cuda.reset_peak_memory_stats(index)
            base = torch.cuda.memory_allocated(index)
            grads = once()
            context.fence()
            peak = int(torch.cuda.max_memory_allocated(index) - base)
            basis = f"{CUDA_BASIS}; retained: saved_tensors_hooks"
        else:
            once()
            results: list[tuple[Any, ...]] = []
            peak, _ = allocator_peak_cpu(lambda: results.append(once()))
            grads = results.pop()
            basis = f"{CPU_BASIS}; retained: saved_tensors_hooks"
        retained = sum(saved.values())
    except (RuntimeError, ValueError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        return PendingRun(Run(strategy=name, is_baseline=True, device=device,
                              backend="torch", skipped=f"failed: {message}"))
    error = (max(relative_error(g, context.oracle[k]) for k, g in zip(grad, grads, strict=True))
             if grad and context.oracle else None)
    del grads

    def forward(_: Any = None) -> Any:
        with torch.enable_grad():
            return contract(*leaves())

    def setup() -> tuple[Any, list[Any], Any]:
        with torch.enable_grad():
            ops = leaves()
            return contract(*ops), [ops[k] for k in grad], context.upstream

    def backward(state: tuple[Any, list[Any], Any]) -> None:
        y, wanted, upstream = state
        torch.autograd.grad(y, wanted, upstream.reshape(y.shape))

    forward_t = prepare(forward, warmup=warmup, fence=context.fence,
                        fence_name=context.fence_name)
    backward_t = (prepare(backward, setup=setup, warmup=warmup, fence=context.fence,
                          fence_name=context.fence_name)
                  if grad else None)
    return PendingRun(Run(
        strategy=name,
        is_baseline=True,
        device=device,
        backend="torch",
        peak_bytes_measured=peak + context.input_bytes,
        peak_bytes_predicted=peak_bytes_predicted,
        retained_bytes_measured=int(retained),
        retained_bytes_predicted=retained_bytes_predicted,
        max_grad_error=error,
        memory_measurement=basis,
        note=note,
    ), forward_t, backward_t)
