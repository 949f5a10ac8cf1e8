"""What every executor shares: records, the error measure, the predicted peak.

The run, the device context, the relative error, the predicted peak, and the
:class:`Executor` interface a backend implements. Nothing here imports a report or the
execution layer: executors sit below both and take plain parameters. torch is imported
inside the functions that need it only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..model.memory import Event, simulate_memory
from ..roofline.steps import StepTime
from ..roofline.time_model import PredictedTime
from .relabel import ascii_equation, contract_along_path, torch_equation
from .timing import Measurement, Timer, measure_interleaved

__all__ = [
    "CALLER_UPSTREAM",
    "CUDA_GRANULARITY",
    "DeviceContext",
    "Executor",
    "MemoryFigures",
    "PendingRun",
    "Run",
    "allocated_bytes",
    "ascii_equation",
    "make_context",
    "predicted_peak_bytes",
    "relative_error",
    "time_together",
    "torch_equation",
]

CUDA_GRANULARITY = 512
"""CUDA's caching allocator rounds every block up to a multiple of 512 bytes."""

CALLER_UPSTREAM = "caller upstream"
"""An executor state's key for the caller's upstream gradient (never a schedule's name):
``prepare_backward`` makes it, and the state holds it until backward returns."""

@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One strategy or baseline, run on one device with one backend.

    Every ``peak_bytes_*`` figure counts the inputs (the caller's operands), as the
    allocator holds them: on CUDA each operand rounded up to 512 bytes.

    Attributes:
        strategy: ``reverse``, ``independent``, ``torch-autograd`` or ``opt_einsum-torch``.
        is_baseline: Whether this is a torch baseline rather than our executor.
        device: ``cpu``, ``cuda:0``, ...
        backend: A registered backend name (baselines: ``torch``).
        forward: Forward timing (None when skipped).
        backward: Backward timing (None when skipped or nothing is differentiated).
        peak_bytes_measured: Measured peak of forward and backward, inputs included.
        peak_bytes_predicted: The model's peak, inputs included, on the same basis.
        retained_bytes_measured: Bytes held for backward at the end of forward.
        retained_bytes_predicted: The model's retained bytes.
        max_grad_error: Largest relative gradient error against the float64 oracle.
        skipped: Why the run did not happen; None when it ran.
        memory_measurement: How memory was measured (the basis of the measured figures).
        note: What was run when it is not the usual call (e.g. a relabelled equation).
        steps: Each computing step's median time (``--profile-steps``), in schedule order.
        other_s: Median seconds of the events between the steps (seeds, views, frees).
        predicted: The time model's forward and backward seconds on the run device's
            calibrated profile (None: no model of what ran, or not calibrated).
    """

    strategy: str
    is_baseline: bool
    device: str
    backend: str
    forward: Measurement | None = None
    backward: Measurement | None = None
    peak_bytes_measured: int | None = None
    peak_bytes_predicted: int | None = None
    retained_bytes_measured: int | None = None
    retained_bytes_predicted: int | None = None
    max_grad_error: float | None = None
    skipped: str | None = None
    memory_measurement: str = ""
    note: str | None = None
    steps: tuple[StepTime, ...] = ()
    other_s: float | None = None
    predicted: PredictedTime | None = None

    def to_dict(self) -> dict[str, Any]:
        """One entry of the ``runs`` section of the JSON report."""
        data: dict[str, Any] = {
            "strategy": self.strategy,
            "baseline": self.is_baseline,
            "device": self.device,
            "backend": self.backend,
            "forward_s": self.forward.to_dict() if self.forward else None,
            "backward_s": self.backward.to_dict() if self.backward else None,
            "peak_bytes_measured": self.peak_bytes_measured,
            "peak_bytes_predicted": self.peak_bytes_predicted,
            "retained_bytes_measured": self.retained_bytes_measured,
            "retained_bytes_predicted": self.retained_bytes_predicted,
            "max_grad_error": self.max_grad_error,
            "skipped": self.skipped,
            "memory_measurement": self.memory_measurement,
            "note": self.note,
            "predicted": self.predicted.to_dict() if self.predicted is not None else None,
        }
        if self.steps:
            total = sum(step.time_s for step in self.steps) + (self.other_s or 0.0)
            data["steps"] = [step.to_dict(total) for step in self.steps]
            data["steps_other_s"] = self.other_s
        return data


@dataclass(frozen=True, slots=True)
class PendingRun:
    """A run whose memory and gradients are known and whose timing is still to come.

    Attributes:
        run: The run without its timings (or a skipped run, with no timers).
        forward: The forward pass, warmed up and ready to time.
        backward: The backward pass (None when nothing is differentiated).
    """

    run: Run
    forward: Timer | None = None
    backward: Timer | None = None


def time_together(pending: Sequence[PendingRun], *, repeats: int) -> tuple[Run, ...]:
    """Time every pending run's phases in the same rounds, one block of each per round.

    A ratio of two runs' medians (a strategy against the torch baseline) is then taken
    over blocks measured side by side, so a change of load during the runs cancels.
    """
    timers = [timer for item in pending for timer in (item.forward, item.backward)
              if timer is not None]
    measured = iter(measure_interleaved(timers, repeats=repeats))
    runs = []
    for item in pending:
        forward = next(measured) if item.forward is not None else None
        backward = next(measured) if item.backward is not None else None
        runs.append(item.run if forward is None and backward is None
                    else replace(item.run, forward=forward, backward=backward))
    return tuple(runs)


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """What an executor measured, above the inputs (the caller adds them).

    Attributes:
        peak_bytes_without_inputs: Peak of forward and backward above the inputs.
        retained_bytes: Bytes held for backward at the end of forward (None: unknown).
        basis: How it was measured, for the report.
    """

    peak_bytes_without_inputs: int
    retained_bytes: int | None
    basis: str


@dataclass
class DeviceContext:
    """Operands, upstream gradient and oracle gradients on one device.

    Attributes:
        device: ``cpu``, ``cuda:0``, ...
        operands: The operands, torch tensors on the device.
        upstream: The upstream gradient, contiguous in the output's labels.
        oracle: Float64 (complex128) gradient of each differentiated operand.
        grad: Positions of the differentiated operands.
        fence: Waits for the device to finish.
        fence_name: How ``fence`` synchronises.
        is_cuda: Whether the device is a CUDA GPU.
    """

    device: str
    operands: list[Any]
    upstream: Any
    oracle: dict[int, Any]
    grad: tuple[int, ...]
    fence: Callable[[], None]
    fence_name: str
    is_cuda: bool

    @property
    def input_bytes(self) -> int:
        """Bytes the allocator holds for the operands (CUDA: rounded up to 512 B each)."""
        return sum(allocated_bytes(t.untyped_storage().nbytes(), self.is_cuda)
                   for t in self.operands)


class Executor(Protocol):
    """A backend: runs a strategy's schedule on a device, phase by phase.

    ``compile`` does all planning once, so that the timed ``forward`` and ``backward``
    calls pay none. ``prepare_backward`` (untimed) puts a fresh upstream gradient into
    a forward state. ``measure_memory`` runs the schedule once more under the device's
    allocator statistics.
    """

    name: str

    def unavailable(self, device: str, dtype: str) -> str | None:
        """Why this backend cannot run on ``device`` with ``dtype``; None when it can."""
        ...

    def compile(self, events: Sequence[Event], sizes: Mapping[str, int],
                context: DeviceContext) -> Any:
        """Everything the runs need: compiled events, operands in the backend's arrays."""
        ...

    def forward(self, program: Any) -> Any:
        """Run the forward events; return the state (live tensors)."""
        ...

    def prepare_backward(self, program: Any, state: Any) -> Any:
        """Add a fresh copy of the upstream gradient to a forward state (untimed)."""
        ...

    def backward(self, program: Any, state: Any) -> Any:
        """Run the backward events on a state from ``prepare_backward``."""
        ...

    def has_backward(self, program: Any) -> bool:
        """Whether the schedule has backward events."""
        ...

    def gradients(self, program: Any, state: Any) -> Mapping[int, Any]:
        """Gradient of each differentiated operand, by position, after ``backward``."""
        ...

    def measure_memory(self, program: Any) -> MemoryFigures:
        """Run forward and backward once, measuring the allocator's peak above the inputs."""
        ...


def allocated_bytes(nbytes: int, is_cuda: bool) -> int:
    """Bytes the allocator gives a request: CUDA rounds up to 512 B, the CPU does not."""
    if not is_cuda:
        return nbytes
    return -(-nbytes // CUDA_GRANULARITY) * CUDA_GRANULARITY


def predicted_peak_bytes(
    events: Sequence[Event],
    *,
    input_bytes: Sequence[int],
    output_elements: int,
    itemsize: int,
    is_cuda: bool,
    upstream_copy: bool = False,
) -> int:
    """A schedule's predicted peak, inputs included, as the device's allocator sees it.

    Args:
        events: The schedule.
        input_bytes: Bytes of each operand.
        output_elements: Elements of the forward result.
        itemsize: Bytes per element.
        is_cuda: Round every allocation up to 512 bytes, as CUDA's caching allocator does.
        upstream_copy: The seed copies the caller's upstream gradient (complex dtypes).

    Example:
        >>> predicted_peak_bytes([], input_bytes=[12, 20], output_elements=1, itemsize=4,
        ...                      is_cuda=True)
        1024
    """
    replay = simulate_memory(
        events,
        input_elements=0,
        output_elements=output_elements,
        itemsize=itemsize,
        granularity=CUDA_GRANULARITY if is_cuda else 1,
        upstream_copy=upstream_copy,
        cpu=not is_cuda,
    )
    return replay.peak_bytes + sum(allocated_bytes(b, is_cuda) for b in input_bytes)


def relative_error(got: Any, want: Any) -> float:
    """Largest absolute difference over the largest magnitude of ``want`` (a torch tensor).

    ``got`` is a torch tensor or anything numpy can read.
    """
    import torch

    if not isinstance(got, torch.Tensor):
        import numpy

        got = torch.from_numpy(numpy.array(got, copy=True))
    want = want.to(got.device)
    if not want.numel():
        return 0.0
    scale = float(torch.max(torch.abs(want)))
    diff = float(torch.max(torch.abs(got.to(want.dtype) - want)))
    return diff / scale if scale > 0 else diff


def oracle_dtype(name: str) -> Any:
    """float64, or complex128 for complex dtypes."""
    import torch

    return torch.complex128 if name.startswith("complex") else torch.float64


def make_context(
    *,
    device: str,
    dtype: str,
    shapes: Sequence[Sequence[int]],
    output_shape: Sequence[int],
    text: str,
    explicit: str,
    seed: int,
    grad: Sequence[int],
    check: bool = True,
    scales: Sequence[float] = (),
) -> DeviceContext:
    """Draw seeded operands and an upstream gradient on ``device``; compute the oracle.

    The oracle is torch.autograd of torch.einsum in float64 (complex128); an equation
    with more than 52 labels is contracted pairwise along opt_einsum's path, each step
    relabelled (:func:`.relabel.contract_along_path`). ``scales``, when given, multiply
    each operand (drawn in float32, then cast), so low precision stays finite.
    """
    import torch

    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    if scales:
        operands = [(torch.randn(tuple(shape), generator=generator, dtype=torch.float32)
                     * scale).to(torch_dtype).to(device)
                    for shape, scale in zip(shapes, scales, strict=True)]
    else:
        operands = [torch.randn(tuple(shape), generator=generator,
                                dtype=torch_dtype).to(device) for shape in shapes]
    upstream = torch.randn(tuple(output_shape), generator=generator,
                           dtype=torch_dtype).to(device)
    precise = oracle_dtype(dtype)
    leaves = [t.detach().to(precise).requires_grad_(k in grad) for k, t in enumerate(operands)]
    oracle: dict[int, Any] = {}
    if grad and check:
        with torch.enable_grad():
            equation = torch_equation(text, explicit)
            if equation is not None:
                y = torch.einsum(equation, *leaves)
            else:
                y = contract_along_path(explicit, leaves)
            wanted = [leaves[k] for k in grad]
            grads = torch.autograd.grad(y, wanted, upstream.to(precise).reshape(y.shape))
        oracle = {k: g.detach() for k, g in zip(grad, grads, strict=True)}
    del leaves
    if device.startswith("cuda"):
        index = torch.device(device).index or 0

        def fence() -> None:
            torch.cuda.synchronize(index)

        return DeviceContext(device, operands, upstream, oracle, tuple(grad), fence,
                             "torch.cuda.synchronize", True)
    return DeviceContext(device, operands, upstream, oracle, tuple(grad), lambda: None,
                         "none", False)
