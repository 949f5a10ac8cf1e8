"""One run: correctness, memory and timing of a strategy or a torch baseline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..equation import torch_equation
from ..strategies import StrategyResult
from ..timing import measure
from .torch_backend import CompiledSchedule, compile_schedule

if TYPE_CHECKING:
    from ..execution import Run, _Context
    from ..report import Report

__all__ = ["run_baseline", "run_strategy"]


def _storage_bytes(tensors: Sequence[Any], exclude: set[int]) -> int:
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        pointer = storage.data_ptr()
        if pointer not in exclude:
            seen[pointer] = storage.nbytes()
    return sum(seen.values())


def _run_compiled(compiled: CompiledSchedule, context: _Context, track: bool
                  ) -> tuple[dict[str, Any], int, int]:
    """Run forward then backward, and return the live tensors.

    With ``track``, also the peak and retained bytes above the inputs, from the
    executor's own count of the storages it holds (CPU).
    """
    import torch

    inputs = {t.untyped_storage().data_ptr() for t in context.operands}
    live: dict[str, Any] = {f"in{k}": t for k, t in enumerate(context.operands)}
    peak = 0
    retained = 0
    with torch.no_grad():
        for op in compiled.forward:
            workspace: list[Any] = []
            kept = op(live, workspace)
            if track:
                peak = max(peak, _storage_bytes(list(live.values()) + workspace, inputs))
            if kept:
                live.update(kept)
        if track:
            output = live[compiled.output]
            retained = (_storage_bytes(list(live.values()), inputs)
                        - _storage_bytes([output], set()))
        if compiled.seed:
            live["upstream"] = context.upstream.clone()
            if track:
                peak = max(peak, _storage_bytes(list(live.values()), inputs))
        for op in compiled.backward:
            workspace = []
            kept = op(live, workspace)
            if track:
                peak = max(peak, _storage_bytes(list(live.values()) + workspace, inputs))
            if kept:
                live.update(kept)
    return live, peak, retained


def run_strategy(
    report: Report, strategy: StrategyResult, context: _Context, *, backend: str,
    repeats: int, warmup: int,
) -> Run:
    """Run one of our strategies: check it, measure its memory, time both phases."""
    import torch

    from ..execution import Run, predicted_peak_above_inputs

    if backend == "numpy":
        from .numpy_backend import run_strategy_numpy

        return run_strategy_numpy(report, strategy, context, repeats=repeats, warmup=warmup)
    sizes = report.equation.size_dict
    compiled = compile_schedule(strategy.events, sizes)
    device = context.device
    output_bytes = report.plan.steps[-1].output_elements * report.itemsize
    if context.is_cuda:
        index = torch.device(device).index or 0
        # One untimed, unmeasured run first: library handles and their workspaces are
        # created lazily and stay; they belong to the baseline, not to the strategy.
        _run_compiled(compiled, context, track=False)
        context.fence()
        torch.cuda.reset_peak_memory_stats(index)
        base = torch.cuda.memory_allocated(index)
        live, _, _ = _run_compiled(compiled, context, track=False)
        context.fence()
        peak = torch.cuda.max_memory_allocated(index) - base
        del live
        # Retained: run the forward alone and count what it leaves.
        probe: dict[str, Any] = {f"in{k}": t for k, t in enumerate(context.operands)}
        with torch.no_grad():
            for op in compiled.forward:
                kept = op(probe, [])
                if kept:
                    probe.update(kept)
        context.fence()
        retained = (torch.cuda.memory_allocated(index) - base
                    - _rounded(output_bytes))
        del probe
        live, _, _ = _run_compiled(compiled, context, track=False)
        measurement = "torch.cuda.max_memory_allocated above the inputs"
    else:
        live, peak, retained = _run_compiled(compiled, context, track=True)
        measurement = "executor's count of the storages it holds, above the inputs"
    error = _max_error(live, context)
    del live
    forward, backward = _time_compiled(compiled, context, repeats, warmup)
    return Run(
        strategy=strategy.name,
        is_baseline=False,
        device=device,
        backend="torch",
        forward=forward,
        backward=backward,
        peak_bytes_measured=int(peak),
        peak_bytes_predicted=predicted_peak_above_inputs(strategy, report, context.is_cuda),
        retained_bytes_measured=int(retained),
        retained_bytes_predicted=strategy.memory.retained_bytes,
        max_grad_error=error,
        measurement=measurement,
    )


def _rounded(nbytes: int) -> int:
    return -(-nbytes // 512) * 512


def _max_error(live: dict[str, Any], context: _Context) -> float | None:
    from ..execution import _relative_error

    if not context.grad:
        return None
    return max(_relative_error(live[f"d{k}"], context.oracle[k]) for k in context.grad)


def _time_compiled(compiled: CompiledSchedule, context: _Context, repeats: int, warmup: int
                   ) -> tuple[Any, Any]:
    import torch

    base = {f"in{k}": t for k, t in enumerate(context.operands)}

    def forward_state(_: Any = None) -> dict[str, Any]:
        live = dict(base)
        with torch.no_grad():
            for op in compiled.forward:
                kept = op(live, [])
                if kept:
                    live.update(kept)
        return live

    def setup() -> dict[str, Any]:
        live = forward_state()
        live["upstream"] = context.upstream.clone()
        return live

    def backward(live: dict[str, Any]) -> None:
        with torch.no_grad():
            for op in compiled.backward:
                op(live, [])

    forward = measure(forward_state, repeats=repeats, warmup=warmup, fence=context.fence,
                      fence_name=context.fence_name)
    if not compiled.backward:
        return forward, None
    backward_m = measure(backward, setup=setup, repeats=repeats, warmup=warmup,
                         fence=context.fence, fence_name=context.fence_name)
    return forward, backward_m


def run_baseline(
    report: Report, name: str, model: StrategyResult | None, context: _Context, *,
    repeats: int, warmup: int,
) -> Run:
    """Run a torch baseline under autograd: torch.einsum, or opt_einsum on our path."""
    import torch

    from ..execution import Run, _relative_error

    eq = report.equation
    grad = context.grad
    if name == "torch-autograd":
        def contract(*tensors: Any) -> Any:
            return torch.einsum(torch_equation(eq.text) or eq.text, *tensors)
    else:
        import opt_einsum

        path = [tuple(step) for step in report.plan.path]

        def contract(*tensors: Any) -> Any:
            return opt_einsum.contract(eq.text, *tensors, optimize=path, backend="torch")

    def leaves() -> list[Any]:
        return [t.detach().requires_grad_(k in grad) for k, t in enumerate(context.operands)]

    input_storages = {t.untyped_storage().data_ptr() for t in context.operands}
    saved: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in input_storages:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    device = context.device
    try:
        index = torch.device(device).index or 0
        if context.is_cuda:
            with torch.enable_grad():
                warm = leaves()
                y = contract(*warm)
                if grad:
                    torch.autograd.grad(y, [warm[k] for k in grad],
                                        context.upstream.reshape(y.shape))
                del warm, y
            context.fence()
            torch.cuda.reset_peak_memory_stats(index)
            base = torch.cuda.memory_allocated(index)
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            ops = leaves()
            y = contract(*ops)
        retained = sum(saved.values())
        if grad:
            upstream = context.upstream.clone().reshape(y.shape)
            grads = torch.autograd.grad(y, [ops[k] for k in grad], upstream)
        else:
            grads = ()
        peak = None
        if context.is_cuda:
            context.fence()
            peak = int(torch.cuda.max_memory_allocated(index) - base)
    except (RuntimeError, ValueError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        return Run(strategy=name, is_baseline=True, device=device, backend="torch",
                   skipped=f"failed: {message}")
    error = (max(_relative_error(g, context.oracle[k]) for k, g in zip(grad, grads, strict=True))
             if grad else None)
    del y, grads, ops

    def forward(_: Any = None) -> Any:
        with torch.enable_grad():
            return contract(*leaves())

    def setup() -> tuple[Any, list[Any], Any]:
        with torch.enable_grad():
            ops = leaves()
            return contract(*ops), [ops[k] for k in grad], context.upstream.clone()

    def backward(state: tuple[Any, list[Any], Any]) -> None:
        y, wanted, upstream = state
        torch.autograd.grad(y, wanted, upstream.reshape(y.shape))

    forward_m = measure(forward, repeats=repeats, warmup=warmup, fence=context.fence,
                        fence_name=context.fence_name)
    backward_m = (measure(backward, setup=setup, repeats=repeats, warmup=warmup,
                          fence=context.fence, fence_name=context.fence_name)
                  if grad else None)
    return Run(
        strategy=name,
        is_baseline=True,
        device=device,
        backend="torch",
        forward=forward_m,
        backward=backward_m,
        peak_bytes_measured=peak,
        peak_bytes_predicted=model.memory.peak_bytes_without_inputs if model else None,
        retained_bytes_measured=int(retained),
        retained_bytes_predicted=model.memory.retained_bytes if model else None,
        max_grad_error=error,
        measurement=("torch.cuda.max_memory_allocated above the inputs; retained from "
                     "saved_tensors_hooks") if context.is_cuda else
                    "retained from saved_tensors_hooks; peak not measurable on cpu",
    )
