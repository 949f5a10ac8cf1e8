"""Record a model's torch.einsum calls, then analyse them as a batch.

:func:`capture` is a context manager. Inside it, every ``torch.einsum`` call, in the
forward pass and in the backward pass (a custom autograd function's backward that calls
it), is recorded: equation, shapes, dtype, which operands need gradients, and how many
times the same call occurred. Outside it torch.einsum is untouched: the recording is a
``TorchFunctionMode`` active only inside the scope, and, for the backward pass (which the
autograd engine runs without the caller's function modes), ``torch.einsum`` replaced by
a recording wrapper until the scope ends.

``captured.report()`` analyses every distinct call (the ``--cases`` batch document,
ranked by each einsum's share of the model's training FLOPs), and ``captured.save(path)``
writes a cases file that ``einsum-analyze --cases`` reads. A call the drop-in does not
plan (integer or bool operands, operands on several devices: it runs torch.einsum for
them) is recorded as such, with the reason, and is not analysed.

torch is imported when :func:`capture` is entered, not when this module is imported.

Example:
    >>> import torch
    >>> from einsum_analyze import capture
    >>> w = torch.ones(3, 4, requires_grad=True)
    >>> with capture() as captured:
    ...     for _ in range(2):
    ...         torch.einsum("bi,ij->bj", torch.ones(2, 3), w).sum().backward()
    >>> [(call.equation, call.count) for call in captured.calls]
    [('bi,ij->bj', 2)]
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import EinsumAnalyzeError
from ..model.types import Shape
from ..report.cases import BatchReport, CaseOutcome
from ..report.report import Report

__all__ = ["CaptureReport", "CapturedCall", "Captured", "RankedEinsum", "capture"]

Phase = Literal["forward", "backward"]


@dataclass(slots=True, kw_only=True)
class CapturedCall:
    """One distinct torch.einsum call and how often it occurred.

    Attributes:
        equation: The equation as the model wrote it.
        shapes: The operands' shapes.
        dtype: The operands' dtype (``"float32"``, ...).
        requires_grad: Whether each operand needed a gradient (grad mode on and
            ``requires_grad``).
        phase: ``"forward"``, or ``"backward"`` for a call made during a backward pass.
        count: How many times it occurred.
        device: The device torch.einsum ran the call on, its result's (``"cpu"``,
            ``"cuda:0"``): the drop-in chooses its plan by that device's time profile.
        devices: The operands' devices, each once, in operand order (``("cpu", "meta")``
            where they differ and torch.einsum ran the call all the same).
        unplanned: Why the drop-in runs torch.einsum for this call without planning it
            (an integer or bool dtype, operands on several devices), or None.
    """

    equation: str
    shapes: tuple[Shape, ...]
    dtype: str
    requires_grad: tuple[bool, ...]
    phase: Phase
    count: int = 0
    device: str = "cpu"
    devices: tuple[str, ...] = ("cpu",)
    unplanned: str | None = None

    @property
    def grad(self) -> tuple[int, ...]:
        """Positions of the operands that needed a gradient."""
        return tuple(k for k, wanted in enumerate(self.requires_grad) if wanted)

    def to_case(self, name: str) -> dict[str, Any]:
        """An entry of a cases file (docs/ci.md)."""
        return {
            "name": name,
            "equation": self.equation,
            "shapes": [list(shape) for shape in self.shapes],
            "dtype": self.dtype,
            "grad": list(self.grad),
            "kind": f"captured {self.phase}",
            "description": f"{self.count} call(s) during the {self.phase} pass",
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedEinsum:
    """One captured einsum, placed against the model's other einsums.

    Attributes:
        name: Its case name in the batch document.
        call: The captured call.
        training_flops: Forward + backward FLOPs under torch autograd, times ``count``.
        flops_share: Its part of the captured einsums' training FLOPs (0 to 1).
        retained_bytes: Bytes torch autograd keeps for backward, times ``count``.
        memory_share: Its part of the captured einsums' retained bytes (0 to 1).
        recommended: What the drop-in runs for this call (``strategy="auto"``): a
            strategy's name, or ``"torch.einsum"`` where no plan is predicted to beat
            torch.einsum's own execution (the saving is then 0).
        reason: Why, as ``cache_info().choices`` gives it.
        peak_bytes_autograd: Predicted training peak of one call under torch autograd,
            inputs counted.
        peak_bytes_recommended: The recommended plan's predicted peak, inputs counted.
        saving_bytes: ``peak_bytes_autograd - peak_bytes_recommended``.
        saving_flops: Training FLOPs saved per call by the recommended plan.
    """

    name: str
    call: CapturedCall
    training_flops: int
    flops_share: float
    retained_bytes: int
    memory_share: float
    recommended: str
    reason: str
    peak_bytes_autograd: int
    peak_bytes_recommended: int
    saving_bytes: int
    saving_flops: int

    def to_dict(self) -> dict[str, Any]:
        """One entry of the ``capture`` section of the batch document."""
        return {
            "name": self.name,
            "equation": self.call.equation,
            "count": self.call.count,
            "phase": self.call.phase,
            "training_flops": self.training_flops,
            "flops_share": self.flops_share,
            "retained_bytes": self.retained_bytes,
            "memory_share": self.memory_share,
            "recommended": self.recommended,
            "reason": self.reason,
            "peak_bytes_autograd": self.peak_bytes_autograd,
            "peak_bytes_recommended": self.peak_bytes_recommended,
            "saving_bytes": self.saving_bytes,
            "saving_flops": self.saving_flops,
        }


def _unplanned_entry(name: str, call: CapturedCall) -> dict[str, Any]:
    """One entry of the batch document's ``not_planned`` section."""
    return {"name": name, "equation": call.equation, "count": call.count,
            "phase": call.phase, "dtype": call.dtype, "devices": list(call.devices),
            "recommended": "torch.einsum", "reason": call.unplanned}


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureReport:
    """The captured einsums analysed: a batch report, ranked.

    Attributes:
        batch: The ``--cases`` batch report, cases in rank order (largest FLOP share
            first); a call the analysis refuses is an error entry, last.
        ranking: Each analysed einsum's shares and the recommended plan's saving.
        not_planned: The calls the drop-in runs through torch.einsum unplanned, by
            name (:attr:`CapturedCall.unplanned` says why); they are not analysed.
    """

    batch: BatchReport
    ranking: tuple[RankedEinsum, ...]
    not_planned: tuple[tuple[str, CapturedCall], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The batch document with a ``capture`` section (the ranking).

        Where some call is not planned, a ``not_planned`` section too.
        """
        data = self.batch.to_dict()
        data["capture"] = [entry.to_dict() for entry in self.ranking]
        if self.not_planned:
            data["not_planned"] = [_unplanned_entry(name, call)
                                   for name, call in self.not_planned]
        return data


@dataclass(slots=True)
class Captured:
    """What :func:`capture` recorded (filled while the scope is open)."""

    _calls: dict[tuple[Any, ...], CapturedCall] = field(default_factory=dict)

    @property
    def calls(self) -> list[CapturedCall]:
        """The distinct calls, in first-seen order."""
        return list(self._calls.values())

    def record(self, equation: str, shapes: Sequence[Shape], dtype: str,
               requires_grad: Sequence[bool], phase: Phase, device: str = "cpu",
               devices: Sequence[str] | None = None, unplanned: str | None = None) -> None:
        """Count one call (``devices``: the operands', ``(device,)`` where not given)."""
        on = tuple(devices) if devices is not None else (device,)
        key = (equation, tuple(shapes), dtype, tuple(requires_grad), phase, device, on)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = CapturedCall(
                equation=equation, shapes=tuple(shapes), dtype=dtype,
                requires_grad=tuple(requires_grad), phase=phase, device=device,
                devices=on, unplanned=unplanned,
            )
        call.count += 1

    def _named(self) -> list[tuple[str, CapturedCall]]:
        """Every call with its name, ``einsum1``, ``einsum2``, ... in first-seen order."""
        return [(f"einsum{number}", call) for number, call in enumerate(self.calls, 1)]

    def cases(self) -> list[dict[str, Any]]:
        """The planned calls as cases-file entries, each under the report's name.

        A call the drop-in does not plan is not a case.
        """
        return [call.to_case(name) for name, call in self._named() if call.unplanned is None]

    def save(self, path: str | Path) -> Path:
        """Write a JSON cases file that ``einsum-analyze --cases PATH`` reads.

        It holds the planned calls (:meth:`cases`).
        """
        target = Path(path)
        if not self._calls:
            raise EinsumAnalyzeError("nothing was captured: no torch.einsum call was made")
        cases = self.cases()
        if not cases:
            raise EinsumAnalyzeError(
                f"nothing to save: the drop-in plans none of the {len(self._calls)} captured "
                f"calls ({self.calls[0].unplanned})")
        document = {"about": "torch.einsum calls captured by einsum_analyze.capture()",
                    "cases": cases}
        target.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        return target

    def report(self, *, optimize: str = "auto") -> CaptureReport:
        """Analyse every captured call; rank them by share of training FLOPs.

        Each call is modelled under torch autograd (what the model runs today) and with
        what the drop-in runs for it (``strategy="auto"`` on the call's device: the
        training-plans search's plan, or torch.einsum itself where no plan is predicted
        to beat it); the saving is the difference of their predicted peaks.
        """
        from ..analysis import analyze

        analysed: list[tuple[str, CapturedCall, Report, Any, Any]] = []
        failed: list[CaseOutcome] = []
        unplanned = tuple((name, call) for name, call in self._named()
                          if call.unplanned is not None)
        for name, call in self._named():
            if call.unplanned is not None:
                continue
            try:
                choice = _dropin_choice(call, optimize)
                strategies = tuple(dict.fromkeys(("torch-autograd", choice.result.name)))
                report = analyze(call.equation, call.shapes, optimize=optimize,
                                 dtype=call.dtype, grad=list(call.grad), strategies=strategies)
            except EinsumAnalyzeError as err:
                failed.append(CaseOutcome(name=name, error=str(err)))
                continue
            autograd = next(s for s in report.strategies if s.name == "torch-autograd")
            analysed.append((name, call, report, autograd, choice))
        total_flops = sum((a.forward_flops + a.backward_flops) * c.count
                          for _, c, _, a, _ in analysed) or 1
        total_kept = sum(a.memory.retained_bytes * c.count for _, c, _, a, _ in analysed) or 1
        ranked: list[tuple[RankedEinsum, Report]] = []
        for name, call, report, autograd, choice in analysed:
            flops = (autograd.forward_flops + autograd.backward_flops) * call.count
            kept = autograd.memory.retained_bytes * call.count
            recommended = autograd if choice.runs_torch else choice.result
            entry = RankedEinsum(
                name=name, call=call, training_flops=flops, flops_share=flops / total_flops,
                retained_bytes=kept, memory_share=kept / total_kept,
                recommended="torch.einsum" if choice.runs_torch else recommended.name,
                reason=choice.reason,
                peak_bytes_autograd=autograd.memory.peak_bytes,
                peak_bytes_recommended=recommended.memory.peak_bytes,
                saving_bytes=autograd.memory.peak_bytes - recommended.memory.peak_bytes,
                saving_flops=(autograd.forward_flops + autograd.backward_flops)
                - (recommended.forward_flops + recommended.backward_flops),
            )
            ranked.append((entry, report))
        ranked.sort(key=lambda pair: (-pair[0].flops_share, -pair[0].memory_share))
        outcomes = [CaseOutcome(name=e.name, report=r) for e, r in ranked] + failed
        return CaptureReport(batch=BatchReport(cases=tuple(outcomes)),
                             ranking=tuple(e for e, _ in ranked), not_planned=unplanned)


def _dropin_choice(call: CapturedCall, optimize: str) -> Any:
    """What the drop-in's ``auto`` runs for the call (:func:`.choice.choose_dropin`)."""
    from .choice import NO_BUDGET, choose_dropin

    return choose_dropin(call.equation, call.shapes, call.dtype, call.grad, "auto", optimize,
                         NO_BUDGET, device=call.device)


def _unplanned_reason(dtype: str, planned: bool, devices: Sequence[str], ran_on: str
                      ) -> str | None:
    """Why the drop-in leaves a call to torch.einsum unplanned (torch.py), or None."""
    if len(devices) > 1:
        return (f"operands on {' and '.join(devices)}: the drop-in runs torch.einsum for "
                f"operands on several devices (it ran the call on {ran_on})")
    if not planned:
        return (f"{dtype} operands: the drop-in runs torch.einsum (it plans floating-point "
                "and complex dtypes only)")
    return None


@contextmanager
def capture() -> Iterator[Captured]:
    """Record every torch.einsum call made inside the scope (forward and backward).

    Yields:
        The :class:`Captured` calls, filled as the scope runs.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    captured = Captured()
    einsums = {torch.einsum, torch.functional.einsum}  # before the scope replaces them

    from .calls import read_call
    from .plans import DTYPE_NAMES

    def record(args: Sequence[Any], result: Any) -> None:
        call = read_call(args)  # every call form torch.einsum reads (sublists too)
        if call is None:
            return
        equation, operands = call
        tensors = [t for t in operands if isinstance(t, torch.Tensor)]
        if not tensors:
            return
        grad_on = torch.is_grad_enabled()
        in_backward = torch._C._current_graph_task_id() != -1
        first = tensors[0].dtype
        dtype = DTYPE_NAMES.get(first, str(first).removeprefix("torch."))
        devices = tuple(dict.fromkeys(str(t.device) for t in tensors))
        ran_on = str(result.device) if isinstance(result, torch.Tensor) else devices[0]
        captured.record(
            equation, [tuple(t.shape) for t in tensors], dtype,
            [bool(grad_on and t.requires_grad) for t in tensors],
            "backward" if in_backward else "forward", ran_on, devices,
            _unplanned_reason(dtype, first in DTYPE_NAMES, devices, ran_on),
        )

    class _Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            result = func(*args, **(kwargs or {}))
            if func in einsums:  # after the call: one torch.einsum refuses is not a call
                record(args, result)
            return result

    original = torch.functional.einsum
    originals = (torch.einsum, torch.functional.einsum)

    def einsum(*args: Any, **kwargs: Any) -> Any:
        # The autograd engine runs backward without this thread's function modes: a
        # call made there (a custom Function's backward) is recorded here instead.
        result = original(*args, **kwargs)
        if torch._C._len_torch_function_stack() == 0:
            record(args, result)
        return result

    torch.einsum = torch.functional.einsum = einsum
    try:
        with _Recorder():
            yield captured
    finally:
        torch.einsum, torch.functional.einsum = originals
