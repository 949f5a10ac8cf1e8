"""One strategy's run with any executor: check its gradients, measure, make its timers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model.memory import Event
from .base import DeviceContext, Executor, PendingRun, Run, relative_error
from .step_timing import time_steps
from .timing import Timer, prepare

__all__ = ["prepare_strategy"]


def prepare_strategy(
    executor: Executor,
    context: DeviceContext,
    *,
    strategy: str,
    events: Sequence[Event],
    sizes: Mapping[str, int],
    peak_bytes_predicted: int,
    retained_bytes_predicted: int | None,
    repeats: int,
    warmup: int,
    profile_steps: bool = False,
) -> PendingRun:
    """Run one of our strategies with ``executor`` on the context's device, untimed.

    The memory figures come from ``executor.measure_memory`` (one untimed run); the
    gradients of another untimed run are checked against the oracle; then forward and
    backward are warmed up, to be timed with no measurement running, in rounds beside
    the other runs (:func:`.base.time_together`).

    Args:
        executor: A registered backend's executor.
        context: Operands, upstream gradient and oracle on the device.
        strategy: The strategy's name.
        events: Its schedule.
        sizes: Size of every label.
        peak_bytes_predicted: The model's peak, inputs included, on the device's basis.
        retained_bytes_predicted: The model's retained bytes.
        repeats: Timed blocks of each step (``profile_steps``).
        warmup: Untimed calls first.
        profile_steps: Also time every step (:mod:`.step_timing`; torch executor only).
    """
    program = executor.compile(events, sizes, context)
    memory = executor.measure_memory(program)
    error = None
    if context.grad and context.oracle:
        state = executor.backward(program, executor.prepare_backward(
            program, executor.forward(program)))
        gradients = executor.gradients(program, state)
        error = max(relative_error(gradients[k], context.oracle[k]) for k in context.grad)
        del state, gradients
    forward, backward = _timers(executor, program, context, warmup)
    timed = (time_steps(program, context, events, repeats=repeats, warmup=warmup)
             if profile_steps else None)
    return PendingRun(Run(
        strategy=strategy,
        is_baseline=False,
        device=context.device,
        backend=executor.name,
        peak_bytes_measured=memory.peak_bytes_without_inputs + context.input_bytes,
        peak_bytes_predicted=peak_bytes_predicted,
        retained_bytes_measured=memory.retained_bytes,
        retained_bytes_predicted=retained_bytes_predicted,
        max_grad_error=error,
        memory_measurement=memory.basis,
        steps=timed[0] if timed else (),
        other_s=timed[1] if timed else None,
    ), forward, backward)


def _timers(executor: Executor, program: Any, context: DeviceContext,
            warmup: int) -> tuple[Timer, Timer | None]:
    def forward(_: Any = None) -> Any:
        return executor.forward(program)

    def setup() -> Any:
        return executor.prepare_backward(program, executor.forward(program))

    def backward(state: Any) -> None:
        executor.backward(program, state)

    forward_t = prepare(forward, warmup=warmup, fence=context.fence,
                        fence_name=context.fence_name)
    if not executor.has_backward(program):
        return forward_t, None
    return forward_t, prepare(backward, setup=setup, warmup=warmup, fence=context.fence,
                              fence_name=context.fence_name)
