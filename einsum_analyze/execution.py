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

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .backends import get_backend
from .backends.base import CUDA_GRANULARITY, Run, make_context, predicted_peak_bytes, time_together
from .backends.baselines import BASELINES, prepare_baseline
from .backends.runners import prepare_strategy
from .errors import BackendUnavailableError, PlanningError
from .model.memory import simulate_memory
from .model.parsing import parse_bytes
from .model.planning import Step
from .render.formatting import format_bytes, format_seconds
from .report.report import Report
from .runs.roofline import attach_calibration
from .search import RECOMMENDED_LABEL
from .strategies import StrategyResult, runs_on_our_executor

__all__ = ["BASELINES", "CUDA_GRANULARITY", "Run", "execute", "execute_report",
           "operand_scales", "predicted_peak", "resolve_devices"]

CPU_FLOPS_PER_S = 5e9
"""A deliberately modest CPU rate, used only to refuse runs that would take far too long."""

CPU_TIME_LIMIT_S = 120.0
"""Runs predicted to take longer than this on CPU are skipped unless forced."""


MAX_DEVICE_BYTES = 2**50
"""No device holds a PiB: a run predicted to need more is refused in one short line."""


def resolve_devices(names: Sequence[str] | None) -> tuple[str, ...]:
    """Turn ``--device`` values into device names.

    ``auto`` (the default, ``None``) is ``cuda:0`` where CUDA is available, else ``cpu``.

    Raises:
        BackendUnavailableError: A CUDA device that this machine does not have.
    """
    import torch

    auto = ("cuda:0",) if torch.cuda.is_available() else ("cpu",)
    if names is None:
        return auto
    devices: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if name == "auto":
            devices.extend(auto)
            continue
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
        raise BackendUnavailableError(f"device {raw!r} is not auto, cpu, cuda, cuda:N or none")
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
    on_run: Callable[[Run], None] | None = None,
    profile_steps: bool = False,
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
        on_run: Called with each run as it finishes, so that a caller can stream them.
        profile_steps: Also time every step of our strategies (torch executor).

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
    ours = [s for s in report.strategies if runs_on_our_executor(s.name)]
    model = next((s for s in report.strategies if s.name == "torch-autograd"), None)
    baselines = BASELINES if backend == "torch" else ()
    if backend != "torch":
        warnings.append(f"the torch baselines (torch-autograd, opt_einsum-torch) run only "
                        f"beside --backend torch: their 'vs torch' ratios compare torch "
                        f"with torch on one device; --backend {backend} runs our strategies "
                        "alone")
    total = len(devices) * (len(ours) + len(baselines))
    done = 0
    overflowed: dict[tuple[str, str], list[str]] = {}
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
                done += 1
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
            scales=operand_scales(report),
        )
        # Every run is measured and warmed up first, then all are timed in the same
        # rounds (time_together): each ratio to the baseline is over blocks measured
        # side by side, so a change of load during the runs cancels.
        pending = []
        for name, is_baseline, strategy in wanted:
            done += 1
            if on_progress is not None:
                on_progress(f"{done}/{total} {name} on {device}"
                            + ("" if is_baseline else f" ({backend})"))
            if is_baseline:
                item = prepare_baseline(
                    name, context, text=eq.text, explicit=eq.explicit, path=report.plan.path,
                    peak_bytes_predicted=(predicted_peak(report, model, context.is_cuda)
                                          if model else None),
                    retained_bytes_predicted=model.memory.retained_bytes if model else None,
                    warmup=warmup,
                )
                if item.run.skipped:
                    warnings.append(f"{name} on {device}: {item.run.skipped}")
            else:
                assert strategy is not None
                item = prepare_strategy(
                    executor, context, strategy=strategy.name, events=strategy.events,
                    sizes=strategy.sizes(eq.size_dict),
                    peak_bytes_predicted=predicted_peak(report, strategy, context.is_cuda),
                    retained_bytes_predicted=predicted_retained(strategy, report,
                                                                context.is_cuda),
                    repeats=repeats, warmup=warmup, profile_steps=profile_steps,
                )
            pending.append(item)
        for run in time_together(pending, repeats=repeats):
            if run.max_grad_error is not None and not math.isfinite(run.max_grad_error):
                run = _overflowed(run, report, context)
                overflowed.setdefault((device, run.note or ""), []).append(run.strategy)
            runs.append(run)
            if on_run is not None:
                on_run(run)
        del pending
        del context
    warnings.extend(f"{', '.join(names)} on {device} {note}"
                    for (device, note), names in overflowed.items())
    noise = _noise_summary(runs)
    if noise:
        warnings.append(noise)
    return tuple(runs), tuple(warnings)


def _noise_summary(runs: Sequence[Run]) -> str | None:
    """One sentence for every noisy timing: how many, the worst, and what to do."""
    noisy: list[tuple[float, str]] = []
    measured = 0
    for run in runs:
        for phase, measurement in (("forward", run.forward), ("backward", run.backward)):
            if measurement is not None:
                measured += 1
                if measurement.warning("") is not None:
                    noisy.append((measurement.relative_spread,
                                  f"{run.strategy} {phase} on {run.device}"))
    if not noisy:
        return None
    spread, label = max(noisy)
    return (f"timings were noisy in {len(noisy)} of {measured} measurements (IQR over a "
            f"quarter of the median; worst: {label}, {spread:.0%}); the JSON report has "
            "the spreads; rerun on a quiet machine or with more --repeats")


def operand_scales(report: Report) -> tuple[float, ...]:
    """Factors for float16's random operands, so that a realistic network stays finite.

    Each summed index of size n multiplies the spread of the output by about sqrt(n);
    each operand is scaled by ``n ** (-1 / (2 k))`` for every summed index it holds,
    where k operands hold that index, so the output's spread is about 1. Other dtypes
    (bfloat16 has float32's range) are drawn unscaled: ``()``.

    Example:
        >>> from einsum_analyze import analyze
        >>> operand_scales(analyze("ab,bc->ac", [(2, 64), (64, 3)], dtype="float16"))
        (0.3535533905932738, 0.3535533905932738)
    """
    if report.dtype != "float16":
        return ()
    eq = report.equation
    holders: dict[str, int] = {}
    for term in eq.terms:
        for label in set(term):
            holders[label] = holders.get(label, 0) + 1
    summed = set(holders) - set(eq.output)
    return tuple(
        math.prod(eq.size_dict[label] ** (-0.5 / holders[label]) for label in set(term) & summed)
        for term in eq.terms
    )


def _overflowed(run: Run, report: Report, context: Any) -> Run:
    """A run whose gradients are not finite, marked as overflowed in its ``note``.

    The forward path is replayed step by step in the run's dtype, on the same operands,
    to name the first step whose output is not finite.
    """
    step = _first_nonfinite_step(report, context)
    where = (f"step {step.index} ({step.equation}) is the first whose output is not finite"
             if step is not None else "the forward is finite; a gradient is not")
    return replace(run, max_grad_error=None, note=f"overflowed in {report.dtype}: {where}")


def _first_nonfinite_step(report: Report, context: Any) -> Step | None:
    """The first forward step whose output is not finite, on the run's own operands."""
    import torch

    from .backends.base import ascii_equation

    live = list(context.operands)
    with torch.no_grad():
        for step in report.plan.steps:
            # opt_einsum's order: operands taken from the highest position down.
            taken = [live.pop(position) for position in sorted(step.operands, reverse=True)]
            try:
                value = torch.einsum(ascii_equation(step.equation), *taken)
            except (RuntimeError, ValueError):
                return None
            if not bool(torch.isfinite(value).all()):
                return step
            live.append(value)
    return None


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
        upstream_copy=report.dtype.startswith("complex") and runs_on_our_executor(strategy.name),
    )


def predicted_retained(strategy: StrategyResult, report: Report, is_cuda: bool) -> int:
    """Bytes the strategy keeps for backward, as the device's allocator sees them.

    On CUDA every kept tensor is rounded up to 512 bytes, as the measurement is.
    """
    if not is_cuda:
        return strategy.memory.retained_bytes
    return simulate_memory(
        strategy.events,
        input_elements=0,
        output_elements=report.plan.steps[-1].output_elements,
        itemsize=report.itemsize,
        granularity=CUDA_GRANULARITY,
        cpu=False,
    ).retained_bytes


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
    if peak > MAX_DEVICE_BYTES:
        return f"needs {format_bytes(peak)}, beyond any device"
    if max_memory_bytes is not None and peak > max_memory_bytes:
        return (f"predicted peak {format_bytes(peak)} exceeds --max-memory "
                f"{format_bytes(max_memory_bytes)}")
    if peak > free:
        return f"predicted peak {format_bytes(peak)} exceeds the {format_bytes(free)} free"
    if device == "cpu" and not force:
        seconds = flops / CPU_FLOPS_PER_S
        if seconds > CPU_TIME_LIMIT_S:
            return (f"predicted {format_seconds(seconds)} per training step on cpu at "
                    f"{CPU_FLOPS_PER_S:.0e} FLOP/s; --force runs it anyway")
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
    on_run: Callable[[Run], None] | None = None,
    profile_steps: bool = False,
) -> Report:
    """Run the report's strategies and the torch baselines; return the report with runs.

    Args:
        report: From :func:`analyze`, with strategies.
        devices: ``["cpu"]``, ``["cuda:0"]``, ``["auto"]``, ...; None: auto, CUDA where
            it is available, else cpu.
        backend: A registered backend (:func:`einsum_analyze.backends.backend_names`):
            ``"torch"``, or ``"numpy"`` (cpu only; the torch baselines run beside ``torch``
            only, and the report's warnings say so).
        repeats: Timed blocks per phase.
        warmup: Untimed calls first.
        seed: Seed of the random operands.
        max_memory: Skip runs whose predicted peak exceeds this (bytes, or ``"8GiB"``).
        force: Run on cpu even when the predicted time is far beyond reason.
        on_progress: Called as each run starts with a label that counts the runs,
            ``"3/8 reverse on cuda:0 (torch)"`` (refused runs count, unannounced).
        on_run: Called with each run as it finishes (the CLI streams them).
        profile_steps: Also time every step of our strategies (torch executor); each
            step's bound uses its device's calibration (:mod:`.runs.roofline`).

    Returns:
        A copy of ``report`` with ``runs``, any new warnings, the devices' calibration
        in ``environment`` and, unless it has one, a roofline on the calibrated profile.

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
        on_run=on_run,
        profile_steps=profile_steps,
    )
    environment = dict(report.environment)
    environment.update(torch_environment(chosen))
    environment["execution_s"] = time.perf_counter() - start
    scales = operand_scales(report)
    if scales:
        environment["operand_scales"] = list(scales)
    recommended = report.recommended
    if recommended is not None and label is not None:
        recommended = replace(recommended, label=label, measured=_measured(runs, label))
    done = replace(report, warnings=report.warnings + notes, environment=environment,
                   recommended=recommended)
    return attach_calibration(done, runs, runnable)


def _with_recommended(report: Report) -> tuple[Report, str | None]:
    """The report to run, so that the recommended plan is among the runs, and its label.

    The recommended plan is the run of the report's own strategy when it is that
    strategy on the report's path with the same schedule; otherwise its result (events
    for its own path) is run beside the others under :data:`RECOMMENDED_LABEL`.
    """
    rec = report.recommended
    if rec is None:
        return report, None
    if rec.plan.strategy == "torch-autograd":
        return report, "torch-autograd"  # torch.einsum's own execution: the baseline's run
    for strategy in report.strategies:
        if strategy.name == rec.plan.strategy and strategy.events == rec.plan.result.events:
            return report, strategy.name
    extra = replace(rec.plan.result, name=RECOMMENDED_LABEL)
    return replace(report, strategies=(*report.strategies, extra)), RECOMMENDED_LABEL


def _measured(runs: Sequence[Run], label: str) -> tuple[dict[str, Any], ...]:
    """Per device: the recommended run's figures and its ratios to torch autograd's."""
    found: list[dict[str, Any]] = []
    for run in runs:
        if run.strategy != label or (run.is_baseline and label != "torch-autograd"):
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
