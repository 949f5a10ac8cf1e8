"""Run strategies and torch baselines on real devices: time, memory, gradient error.

For every device, the operands and an upstream gradient are drawn once (seeded). The
oracle is torch.autograd of torch.einsum in float64 (complex128 for complex dtypes).
Each run is first checked for memory: a run whose predicted peak does not fit the
device's free memory, or a user's limit, is skipped with its reason; nothing is
allocated for it.

The runs themselves belong to the executors in :mod:`einsum_analyze.backends` (our
strategies, by backend name) and :mod:`einsum_analyze.backends.baselines`. Memory is
the allocator's: on CUDA ``max_memory_allocated``, on cpu torch.profiler's allocator
events; every peak counts the inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .backends import get_backend
from .backends.base import CUDA_GRANULARITY, Run, make_context, predicted_peak_bytes
from .backends.baselines import BASELINES, run_baseline
from .backends.runners import run_strategy
from .errors import BackendUnavailableError, PlanningError
from .parsing import parse_bytes
from .report import Report
from .search import RECOMMENDED_LABEL
from .strategies import StrategyResult

__all__ = ["BASELINES", "CUDA_GRANULARITY", "Run", "execute", "execute_report",
           "predicted_peak", "resolve_devices"]

CPU_FLOPS_PER_S = 5e9
"""A deliberately modest CPU rate, used only to refuse runs that would take far too long."""

CPU_TIME_LIMIT_S = 120.0
"""Runs predicted to take longer than this on CPU are skipped unless forced."""


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
    backend: str = "torch",
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
        backend: A registered backend's name; the torch baselines run beside ``torch``.
        repeats: Timed blocks per phase.
        warmup: Untimed calls first.
        seed: Seed of the random operands.
        max_memory_bytes: Skip runs whose predicted peak (inputs included) exceeds this.
        force: Run on CPU even when the predicted time is far beyond reason.
        on_progress: Called with a label as each run starts.

    Returns:
        The runs, and warnings (noisy timings, failed baselines).

    Raises:
        BackendUnavailableError: The backend cannot run on a device or with the dtype.
    """
    executor = get_backend(backend)
    eq = report.equation
    grad = report.gradients.operands if report.gradients is not None else _grad_of(report)
    runs: list[Run] = []
    warnings: list[str] = []
    ours = [s for s in report.strategies if s.name != "torch-autograd"]
    model = next((s for s in report.strategies if s.name == "torch-autograd"), None)
    baselines = BASELINES if backend == "torch" else ()
    for device in devices:
        why_not = executor.unavailable(device, report.dtype)
        if why_not is not None:
            raise BackendUnavailableError(why_not)
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
        context = make_context(
            device=device, dtype=report.dtype, shapes=eq.shapes,
            output_shape=[eq.size_dict[c] for c in eq.output], text=eq.text,
            explicit=eq.explicit, seed=seed, grad=grad, check=check,
        )
        for name, is_baseline, strategy in wanted:
            if on_progress is not None:
                on_progress(f"{name} on {device}" + ("" if is_baseline else f" ({backend})"))
            if is_baseline:
                run = run_baseline(
                    name, context, text=eq.text, explicit=eq.explicit, path=report.plan.path,
                    peak_bytes_predicted=(predicted_peak(report, model, context.is_cuda)
                                          if model else None),
                    retained_bytes_predicted=model.memory.retained_bytes if model else None,
                    repeats=repeats, warmup=warmup,
                )
                if run.skipped:
                    warnings.append(f"{name} on {device}: {run.skipped}")
            else:
                assert strategy is not None
                run = run_strategy(
                    executor, context, strategy=strategy.name, events=strategy.events,
                    sizes=eq.size_dict,
                    peak_bytes_predicted=predicted_peak(report, strategy, context.is_cuda),
                    retained_bytes_predicted=strategy.memory.retained_bytes,
                    repeats=repeats, warmup=warmup,
                )
            runs.append(run)
        del context
    for run in runs:
        for phase, measurement in (("forward", run.forward), ("backward", run.backward)):
            if measurement is not None:
                note = measurement.warning(f"{run.strategy} {phase} on {run.device}")
                if note:
                    warnings.append(note)
    return tuple(runs), tuple(warnings)


def predicted_peak(report: Report, strategy: StrategyResult, is_cuda: bool) -> int:
    """The strategy's predicted peak, inputs included, as the device's allocator sees it.

    On CUDA every allocation, the operands' included, is rounded up to 512 bytes.
    """
    if not is_cuda:
        return strategy.memory.peak_bytes
    eq = report.equation
    return predicted_peak_bytes(
        strategy.events,
        input_bytes=[_elements(shape) * report.itemsize for shape in eq.shapes],
        output_elements=report.plan.steps[-1].output_elements,
        itemsize=report.itemsize,
        is_cuda=True,
    )


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


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


def execute(
    report: Report,
    *,
    devices: Sequence[str] | None = None,
    backend: str = "torch",
    repeats: int = 10,
    warmup: int = 3,
    seed: int = 0,
    max_memory: int | str | None = None,
    force: bool = False,
    on_progress: Callable[[str], None] | None = None,
) -> Report:
    """Run the report's strategies and the torch baselines; return the report with runs.

    Args:
        report: From :func:`analyze`, with strategies.
        devices: ``["cpu"]``, ``["cuda:0"]``, ...; None: cpu, plus cuda if present.
        backend: A registered backend (:func:`einsum_analyze.backends.backend_names`):
            ``"torch"``, or ``"numpy"`` (cpu only, no baselines).
        repeats: Timed blocks per phase.
        warmup: Untimed calls first.
        seed: Seed of the random operands.
        max_memory: Skip runs whose predicted peak exceeds this (bytes, or ``"8GiB"``).
        force: Run on cpu even when the predicted time is far beyond reason.
        on_progress: Called with a label as each run starts.

    Returns:
        A copy of ``report`` with ``runs`` and any new warnings.

    Raises:
        BackendUnavailableError: An unknown or absent device, backend or dtype.
    """
    executor = get_backend(backend)
    if repeats < 1 or warmup < 0:
        raise PlanningError("--repeats must be at least 1 and --warmup at least 0")
    limit = None
    if max_memory is not None:
        try:
            limit = max_memory if isinstance(max_memory, int) else parse_bytes(max_memory)
        except ValueError as err:
            raise PlanningError(f"--max-memory: {err}") from err
    chosen = resolve_devices(devices)
    for device in chosen:
        reason = executor.unavailable(device, report.dtype)
        if reason is not None:
            raise BackendUnavailableError(reason)
    start = time.perf_counter()
    runnable, label = _with_recommended(report)
    runs, notes = execute_report(
        runnable,
        devices=chosen,
        backend=backend,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        max_memory_bytes=limit,
        force=force,
        on_progress=on_progress,
    )
    environment = dict(report.environment)
    environment.update(torch_environment(chosen))
    environment["execution_s"] = time.perf_counter() - start
    recommended = report.recommended
    if recommended is not None and label is not None:
        recommended = replace(recommended, label=label, measured=_measured(runs, label))
    return replace(report, runs=runs, warnings=report.warnings + notes, environment=environment,
                   recommended=recommended)


def _with_recommended(report: Report) -> tuple[Report, str | None]:
    """The report to run, so that the recommended plan is among the runs, and its label.

    The recommended plan is the run of the report's own strategy when it is that
    strategy on the report's path with the same schedule; otherwise its result (events
    for its own path) is run beside the others under :data:`RECOMMENDED_LABEL`.
    """
    rec = report.recommended
    if rec is None:
        return report, None
    for strategy in report.strategies:
        if strategy.name == rec.plan.strategy and strategy.events == rec.plan.result.events:
            return report, strategy.name
    extra = replace(rec.plan.result, name=RECOMMENDED_LABEL)
    return replace(report, strategies=(*report.strategies, extra)), RECOMMENDED_LABEL


def _measured(runs: Sequence[Run], label: str) -> tuple[dict[str, Any], ...]:
    """Per device: the recommended run's figures and its ratios to torch autograd's."""
    found: list[dict[str, Any]] = []
    for run in runs:
        if run.strategy != label or run.is_baseline:
            continue
        entry: dict[str, Any] = {"device": run.device, "backend": run.backend,
                                 "skipped": run.skipped}
        torch_run = next((r for r in runs if r.strategy == "torch-autograd"
                          and r.device == run.device and r.skipped is None), None)
        total = _seconds(run)
        entry.update({
            "forward_backward_s": total,
            "peak_bytes_measured": run.peak_bytes_measured,
            "peak_bytes_predicted": run.peak_bytes_predicted,
            "max_grad_error": run.max_grad_error,
        })
        if torch_run is not None:
            reference = _seconds(torch_run)
            if total is not None and reference:
                entry["time_vs_torch"] = total / reference
            if run.peak_bytes_measured is not None and torch_run.peak_bytes_measured:
                entry["peak_vs_torch"] = run.peak_bytes_measured / torch_run.peak_bytes_measured
        found.append(entry)
    return tuple(found)


def _seconds(run: Run) -> float | None:
    if run.forward is None:
        return None
    return run.forward.median_s + (run.backward.median_s if run.backward else 0.0)


def torch_environment(devices: Sequence[str]) -> dict[str, Any]:
    """Versions, threads and GPUs of the torch that ran the strategies."""
    import numpy
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cuda_available": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "grad_mode": "no_grad for the executor; enable_grad for baselines",
    }
    names = [torch.cuda.get_device_name(torch.device(d)) for d in devices if d.startswith("cuda")]
    if names:
        info["cuda_devices"] = names
        info["cuda_version"] = torch.version.cuda
    return info
