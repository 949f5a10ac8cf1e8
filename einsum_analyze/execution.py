"""Run strategies and torch baselines on real devices: time, memory, gradient error.

For every device, the operands and an upstream gradient are drawn once (seeded). The
oracle is torch.autograd of torch.einsum in float64 (complex128 for complex dtypes).
Each run is first checked for memory: a run whose predicted peak does not fit the
device's free memory, or a user's limit, is skipped with its reason; nothing is
allocated for it.

Memory is measured above a baseline that already holds the operands: on CUDA with
``max_memory_allocated``; on CPU by the executor's own count of the storages it holds,
and for torch autograd by the bytes of the tensors it saves for backward
(``saved_tensors_hooks``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .equation import torch_equation
from .errors import BackendUnavailableError
from .memory import simulate_memory
from .report import Report
from .strategies import StrategyResult
from .timing import Measurement

__all__ = ["BASELINES", "Run", "execute_report", "resolve_devices"]

BASELINES = ("torch-autograd", "opt_einsum-torch")
"""torch.einsum under autograd; opt_einsum.contract on the report's path under autograd."""

CUDA_GRANULARITY = 512
"""CUDA's caching allocator rounds every block up to a multiple of 512 bytes."""

CPU_FLOPS_PER_S = 5e9
"""A deliberately modest CPU rate, used only to refuse runs that would take far too long."""

CPU_TIME_LIMIT_S = 120.0
"""Runs predicted to take longer than this on CPU are skipped unless forced."""

Backend = Literal["torch", "numpy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One strategy or baseline, run on one device with one backend.

    Memory figures are bytes above the operands (the caller's inputs); see the schema.

    Attributes:
        strategy: ``reverse``, ``independent``, ``torch-autograd`` or ``opt_einsum-torch``.
        is_baseline: Whether this is a torch baseline rather than our executor.
        device: ``cpu``, ``cuda:0``, ...
        backend: ``torch`` or ``numpy``.
        forward: Forward timing (None when skipped).
        backward: Backward timing (None when skipped or nothing is differentiated).
        peak_bytes_measured: Measured peak above the inputs, forward and backward.
        peak_bytes_predicted: The model's peak above the inputs, on the same basis.
        retained_bytes_measured: Bytes held for backward at the end of forward.
        retained_bytes_predicted: The model's retained bytes.
        max_grad_error: Largest relative gradient error against the float64 oracle.
        skipped: Why the run did not happen; None when it ran.
        measurement: How memory was measured.
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
    measurement: str = ""

    def to_dict(self) -> dict[str, Any]:
        """One entry of the ``runs`` section of the JSON report."""
        return {
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
            "memory_measurement": self.measurement,
        }


def resolve_devices(names: Sequence[str] | None) -> tuple[str, ...]:
    """Turn ``--device`` values into device names; the default is cpu plus cuda if present.

    Raises:
        BackendUnavailableError: A CUDA device that this machine does not have.
    """
    import torch

    if names is None:
        return ("cpu", "cuda:0") if torch.cuda.is_available() else ("cpu",)
    devices: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if name == "cpu":
            devices.append("cpu")
            continue
        if name == "cuda" or name.startswith("cuda:"):
            index_text = name.partition(":")[2] or "0"
            if not index_text.isdigit():
                raise BackendUnavailableError(f"device {raw!r} is not cpu, cuda or cuda:N")
            if not torch.cuda.is_available():
                raise BackendUnavailableError(
                    f"device {raw!r} requested but no CUDA GPU is present"
                )
            index = int(index_text)
            if index >= torch.cuda.device_count():
                raise BackendUnavailableError(
                    f"device {raw!r} does not exist; this machine has "
                    f"{torch.cuda.device_count()} CUDA device(s)"
                )
            devices.append(f"cuda:{index}")
            continue
        raise BackendUnavailableError(f"device {raw!r} is not cpu, cuda, cuda:N or none")
    return tuple(dict.fromkeys(devices))


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _oracle_dtype(name: str) -> Any:
    import torch

    return torch.complex128 if name.startswith("complex") else torch.float64


def _relative_error(got: Any, want: Any) -> float:
    import torch

    want = want.to(got.device)
    scale = float(torch.max(torch.abs(want))) if want.numel() else 0.0
    diff = float(torch.max(torch.abs(got.to(want.dtype) - want))) if want.numel() else 0.0
    return diff / scale if scale > 0 else diff


@dataclass
class _Context:
    """Operands, upstream gradient and oracle gradients on one device."""

    device: str
    operands: list[Any]
    upstream: Any
    oracle: dict[int, Any]
    grad: tuple[int, ...]
    fence: Callable[[], None]
    fence_name: str
    is_cuda: bool


def _make_context(
    report: Report, device: str, seed: int, grad: Sequence[int], *, check: bool = True
) -> _Context:
    import torch

    eq = report.equation
    dtype = _torch_dtype(report.dtype)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    operands = [
        torch.randn(shape, generator=generator, dtype=dtype).to(device) for shape in eq.shapes
    ]
    out_shape = [eq.size_dict[c] for c in eq.output]
    upstream = torch.randn(out_shape, generator=generator, dtype=dtype).to(device)
    precise = _oracle_dtype(report.dtype)
    leaves = [t.detach().to(precise).requires_grad_(k in grad) for k, t in enumerate(operands)]
    oracle: dict[int, Any] = {}
    if grad and check:
        with torch.enable_grad():
            typed = torch_equation(eq.text)
            if typed is not None:
                y = torch.einsum(typed, *leaves)
            else:
                # torch.einsum takes 52 ASCII letters only; opt_einsum relabels each step.
                import opt_einsum

                y = opt_einsum.contract(eq.explicit, *leaves, backend="torch")
            wanted = [leaves[k] for k in grad]
            grads = torch.autograd.grad(y, wanted, upstream.to(precise).reshape(y.shape))
        oracle = {k: g.detach() for k, g in zip(grad, grads, strict=True)}
    is_cuda = device.startswith("cuda")
    if is_cuda:
        index = torch.device(device).index or 0

        def fence() -> None:
            torch.cuda.synchronize(index)

        return _Context(device, operands, upstream, oracle, tuple(grad), fence,
                        "torch.cuda.synchronize", True)
    return _Context(device, operands, upstream, oracle, tuple(grad), lambda: None, "none", False)


def _free_bytes(device: str) -> int:
    """Bytes free on the device now (CPU: the kernel's MemAvailable)."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 2**62


def execute_report(
    report: Report,
    *,
    devices: Sequence[str],
    backend: Backend = "torch",
    repeats: int = 10,
    warmup: int = 3,
    seed: int = 0,
    max_memory_bytes: int | None = None,
    force: bool = False,
    on_progress: Callable[[str], None] | None = None,
) -> tuple[tuple[Run, ...], tuple[str, ...]]:
    """Run every modelled strategy and every baseline on every device.

    Args:
        report: An analysis with strategies (see :func:`einsum_analyze.analyze`).
        devices: Device names from :func:`resolve_devices`.
        backend: ``torch`` (CPU and CUDA) or ``numpy`` (CPU only; no baselines).
        repeats: Timed blocks per phase.
        warmup: Untimed calls first.
        seed: Seed of the random operands.
        max_memory_bytes: Skip runs whose predicted peak (inputs included) exceeds this.
        force: Run on CPU even when the predicted time is far beyond reason.
        on_progress: Called with a label as each run starts.

    Returns:
        The runs, and warnings (noisy timings, failed baselines).
    """
    from .backends import runners

    grad = report.gradients.operands if report.gradients is not None else _grad_of(report)
    runs: list[Run] = []
    warnings: list[str] = []
    ours = [s for s in report.strategies if s.name != "torch-autograd"]
    model = next((s for s in report.strategies if s.name == "torch-autograd"), None)
    baselines = BASELINES if backend == "torch" else ()
    for device in devices:
        if backend == "numpy" and device != "cpu":
            raise BackendUnavailableError(f"the numpy backend runs on cpu only, not {device}")
        # Decide every refusal first: a refused run allocates nothing, and a device
        # where every run is refused gets no operands and no oracle either.
        free = _free_bytes(device)
        plans: list[tuple[str, bool, StrategyResult | None, str | None]] = [
            (s.name, False, s, _refusal(report, s, device, free, max_memory_bytes, force))
            for s in ours
        ] + [
            (name, True, model, _refusal(report, model, device, free, max_memory_bytes, force))
            for name in baselines
        ]
        for name, is_baseline, _, reason in plans:
            if reason is not None:
                runs.append(Run(strategy=name, is_baseline=is_baseline, device=device,
                                backend="torch" if is_baseline else backend, skipped=reason))
        wanted = [(name, is_baseline, s) for name, is_baseline, s, reason in plans
                  if reason is None]
        if not wanted:
            continue
        largest = max(_predicted_peak(report, s) for _, _, s in wanted)
        check = bool(grad) and _oracle_bytes(report) + largest <= free
        if grad and not check:
            warnings.append(
                f"on {device} the float64 oracle would not fit beside the runs "
                f"({_oracle_bytes(report)} B): gradients were not checked"
            )
        context = _make_context(report, device, seed, grad, check=check)
        for name, is_baseline, strategy in wanted:
            if on_progress is not None:
                on_progress(f"{name} on {device}" + ("" if is_baseline else f" ({backend})"))
            if is_baseline:
                run = runners.run_baseline(report, name, strategy, context, repeats=repeats,
                                           warmup=warmup)
                if run.skipped:
                    warnings.append(f"{name} on {device}: {run.skipped}")
            else:
                assert strategy is not None
                run = runners.run_strategy(report, strategy, context, backend=backend,
                                           repeats=repeats, warmup=warmup)
            runs.append(run)
        del context
    for run in runs:
        for phase, measurement in (("forward", run.forward), ("backward", run.backward)):
            if measurement is not None:
                note = measurement.warning(f"{run.strategy} {phase} on {run.device}")
                if note:
                    warnings.append(note)
    return tuple(runs), tuple(warnings)


def _grad_of(report: Report) -> tuple[int, ...]:
    for strategy in report.strategies:
        return tuple(sorted(strategy.operand_flops))
    return ()


def _predicted_peak(report: Report, strategy: StrategyResult | None) -> int:
    """Predicted peak, inputs included; a margin for what the torch model leaves out."""
    if strategy is None:
        return int(report.forward_memory.peak_bytes * 1.25)
    if strategy.name == "torch-autograd":
        return int(strategy.memory.peak_bytes * 1.25)
    return strategy.memory.peak_bytes


def _oracle_bytes(report: Report) -> int:
    """What the float64 (complex128) oracle holds: operands, retained tensors, gradients."""
    precise = 16 if report.dtype.startswith("complex") else 8
    scale = precise / report.itemsize
    model = next((s for s in report.strategies if s.name == "torch-autograd"), None)
    peak = model.memory.peak_bytes if model is not None else report.forward_memory.peak_bytes
    return int(peak * scale * 1.25) + report.forward_memory.input_bytes


def _refusal(
    report: Report,
    strategy: StrategyResult | None,
    device: str,
    free: int,
    max_memory_bytes: int | None,
    force: bool,
) -> str | None:
    """Why a run must not start, or None."""
    peak = _predicted_peak(report, strategy)
    if strategy is None:
        flops = report.plan.flops * 3
    else:
        flops = strategy.forward_flops + strategy.backward_flops
    if max_memory_bytes is not None and peak > max_memory_bytes:
        return f"predicted peak {peak} B exceeds --max-memory {max_memory_bytes} B"
    if peak > free:
        return f"predicted peak {peak} B exceeds the {free} B free on {device}"
    if device == "cpu" and not force:
        seconds = flops / CPU_FLOPS_PER_S
        if seconds > CPU_TIME_LIMIT_S:
            return (f"predicted {seconds:.0f} s per training step on cpu at "
                    f"{CPU_FLOPS_PER_S:.0e} FLOP/s; pass --force to run it anyway")
    return None


def predicted_peak_above_inputs(strategy: StrategyResult, report: Report, is_cuda: bool) -> int:
    """The strategy's predicted peak above the inputs; on CUDA with allocator rounding."""
    if not is_cuda:
        return strategy.memory.peak_bytes_without_inputs
    rounded = simulate_memory(
        strategy.events,
        input_elements=0,
        output_elements=report.plan.steps[-1].output_elements,
        itemsize=report.itemsize,
        granularity=CUDA_GRANULARITY,
    )
    return rounded.peak_bytes
