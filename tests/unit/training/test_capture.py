"""capture(): a model's torch.einsum calls, recorded in forward and backward, reported
as a batch ranked by share of training FLOPs, saved as a cases file the CLI reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from einsum_analyze import capture
from einsum_analyze.errors import EinsumAnalyzeError
from einsum_analyze.report import load_schema
from einsum_analyze.report.cases import parse_cases


class _EinsumInBackward(torch.autograd.Function):
    """A matrix product whose backward calls torch.einsum."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = ctx.saved_tensors
        return torch.einsum("ik,jk->ij", grad, b), torch.einsum("ij,ik->jk", a, grad)


def _model_step(w: torch.Tensor, v: torch.Tensor) -> None:
    x = torch.randn(8, 3)
    h = torch.einsum("bi,ij->bj", x, w)
    y = _EinsumInBackward.apply(h, v)
    attention = torch.einsum("bqd,bkd->bqk", torch.randn(2, 16, 8), torch.randn(2, 16, 8))
    (y.sum() + attention.sum()).backward()


def test_records_forward_and_backward_calls_with_counts() -> None:
    original = torch.einsum
    w = torch.randn(3, 4, requires_grad=True)
    v = torch.randn(4, 5, requires_grad=True)
    with capture() as captured:
        for _ in range(3):
            _model_step(w, v)
    assert torch.einsum is original
    calls = {(c.equation, c.phase): c for c in captured.calls}
    assert set(calls) == {("bi,ij->bj", "forward"), ("bqd,bkd->bqk", "forward"),
                          ("ik,jk->ij", "backward"), ("ij,ik->jk", "backward")}
    forward = calls["bi,ij->bj", "forward"]
    assert forward.count == 3
    assert forward.shapes == ((8, 3), (3, 4))
    assert forward.dtype == "float32"
    assert forward.requires_grad == (False, True)
    assert all(c.count == 3 for c in captured.calls)


def test_without_capture_torch_einsum_is_untouched() -> None:
    original = torch.einsum, torch.functional.einsum
    with capture():
        pass
    assert (torch.einsum, torch.functional.einsum) == original
    with pytest.raises(KeyError), capture():
        raise KeyError("the scope ends with an error")
    assert (torch.einsum, torch.functional.einsum) == original
    torch.einsum("ij->j", torch.ones(2, 2))  # nothing records it


def test_report_ranks_by_share_of_training_flops_and_validates() -> None:
    w = torch.randn(3, 4, requires_grad=True)
    v = torch.randn(4, 5, requires_grad=True)
    with capture() as captured:
        for _ in range(2):
            _model_step(w, v)
    report = captured.report()
    shares = [entry.flops_share for entry in report.ranking]
    assert shares == sorted(shares, reverse=True)
    assert sum(shares) == pytest.approx(1.0)
    assert report.ranking[0].call.equation == "bqd,bkd->bqk"
    for entry in report.ranking:
        assert entry.saving_bytes == entry.peak_bytes_autograd - entry.peak_bytes_recommended
        assert entry.recommended
    document = report.to_dict()
    assert [case["name"] for case in document["cases"]] == [e.name for e in report.ranking]
    import jsonschema

    jsonschema.Draft202012Validator(load_schema()).validate(document)


def test_save_writes_a_cases_file_the_cli_reads(tmp_path: Path) -> None:
    w = torch.randn(3, 4, requires_grad=True)
    v = torch.randn(4, 5, requires_grad=True)
    with capture() as captured:
        _model_step(w, v)
    path = captured.save(tmp_path / "model.json")
    entries = parse_cases(path.read_text(), "json")
    assert [e.case.equation for e in entries if e.case] == [c.equation for c in captured.calls]
    result = subprocess.run(
        [sys.executable, "-m", "einsum_analyze", "--cases", str(path), "--device", "none",
         "--json", "-"],
        capture_output=True, text=True, check=False, cwd=Path(__file__).parents[3],
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["ok"] == len(captured.calls)


def test_sublist_calls_are_recorded_and_the_dropins_own_questions_are_not() -> None:
    from einsum_analyze.torch import clear_cache, einsum

    clear_cache()  # a plan to make: the drop-in asks torch.einsum first
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)
    with capture() as captured:
        torch.einsum(a, [0, 1], b, [1, 2], [0, 2])
        # the drop-in asks torch.einsum about the call on the meta device: not a call
        einsum("ij,jk->ik", a, b, strategy="reverse")
    assert [(c.equation, c.shapes) for c in captured.calls] == [
        ("AB,BC->AC", ((3, 4), (4, 5)))]


def test_the_ranking_says_what_the_drop_in_runs_for_each_call(monkeypatch) -> None:
    # Two calls: a matrix product the drop-in leaves to torch.einsum, and a chain whose
    # plan is predicted faster on the cpu. The ranking names what `auto` runs for each,
    # as the drop-in itself then does (generous planning time: no deadline decides).
    # Both predict on the nominal cpu profile: a calibration an earlier test left in the
    # process (measured on a loaded machine) would decide the chain otherwise.
    import einsum_analyze.torch as dropin
    from einsum_analyze.backends import calibration
    from einsum_analyze.training.choice import planning_time

    monkeypatch.setattr(calibration, "_CACHE", {})

    generator = torch.Generator().manual_seed(0)
    pair = [torch.randn(8, 3, generator=generator),
            torch.randn(3, 4, generator=generator).requires_grad_()]
    chain = [torch.randn(s, generator=generator).requires_grad_()
             for s in ((512, 2), (512, 2), (2, 7), (7, 2, 7))]
    calls = {"bi,ij->bj": pair, "bc,bd,cm,mdn->bn": chain}
    with capture() as captured:
        for equation, operands in calls.items():
            torch.einsum(equation, *operands).sum().backward()
    with planning_time(600):
        report = captured.report()
        ran = {}
        for equation, operands in calls.items():
            dropin.clear_cache()
            dropin.einsum(equation, *operands)
            ran[equation] = dropin.cache_info().choices[-1]
    for entry in report.ranking:
        choice = ran[entry.call.equation]
        assert entry.call.device == "cpu"
        assert entry.recommended == choice.runs, entry.reason
        assert choice.reason.startswith(entry.reason)  # the plan adds what compiled calls run
        if entry.recommended == "torch.einsum":
            assert entry.saving_bytes == 0 and entry.saving_flops == 0
    assert {e.recommended == "torch.einsum" for e in report.ranking} == {True, False}, [
        (e.call.equation, e.recommended, e.reason) for e in report.ranking]


def test_a_call_torch_einsum_refuses_is_not_recorded() -> None:
    # Mixed dtypes: torch.einsum raises, so the model never ran that einsum; it must not
    # be counted as a call of the first operand's dtype.
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with capture() as captured:
        torch.einsum("ij,jk->ik", a, b)
        with pytest.raises(RuntimeError):
            torch.einsum("ij,jk->ik", a, b.double())
        with pytest.raises(RuntimeError):
            torch.einsum("ij,jk->ikk", a, b)
    assert [(c.equation, c.dtype, c.count) for c in captured.calls] == [
        ("ij,jk->ik", "float32", 1)]


def test_an_integer_einsum_is_recorded_as_run_by_torch_einsum_not_as_a_failure() -> None:
    # The drop-in plans floating and complex dtypes; integer and bool operands go to
    # torch.einsum as they are. The report says that, with the reason: not an error.
    import jsonschema

    ints = torch.arange(12).reshape(3, 4), torch.arange(20).reshape(4, 5)
    w = torch.randn(3, 4, requires_grad=True)
    with capture() as captured:
        torch.einsum("ij,jk->ik", *ints)
        torch.einsum("ij,jk->ik", w, torch.randn(4, 5))
    integer, floating = captured.calls
    assert integer.dtype == "int64"
    assert integer.unplanned is not None and integer.unplanned.startswith("int64 operands: ")
    assert floating.unplanned is None
    report = captured.report()
    assert report.batch.has_errors is False
    assert [e.call.equation for e in report.ranking] == ["ij,jk->ik"]
    assert report.ranking[0].call is floating
    assert report.not_planned == (("einsum1", integer),)
    document = report.to_dict()
    assert [case["name"] for case in document["cases"]] == ["einsum2"]
    assert document["not_planned"] == [{
        "name": "einsum1", "equation": "ij,jk->ik", "count": 1, "phase": "forward",
        "dtype": "int64", "devices": ["cpu"], "recommended": "torch.einsum",
        "reason": integer.unplanned}]
    jsonschema.Draft202012Validator(load_schema()).validate(document)
    assert [case["name"] for case in captured.cases()] == ["einsum2"]


def test_what_the_dropin_does_with_an_integer_call_is_torch_einsum() -> None:
    from einsum_analyze.torch import einsum

    a, b = torch.arange(6).reshape(2, 3), torch.arange(12).reshape(3, 4)
    result = einsum("ij,jk->ik", a, b)
    assert result.dtype == torch.int64 and torch.equal(result, torch.einsum("ij,jk->ik", a, b))


def test_a_call_on_two_devices_that_torch_einsum_runs_names_both() -> None:
    # torch.einsum runs a cpu operand with a meta one; the drop-in leaves operands on
    # several devices to it. The call is recorded with both devices, and where it ran.
    a, b = torch.randn(2, 3), torch.randn(3, 4, device="meta")
    a_meta, b_cpu = torch.randn(2, 3, device="meta"), torch.randn(3, 4)
    with capture() as captured:
        ran_on = [torch.einsum("ij,jk->ik", a, b).device,
                  torch.einsum("ij,jk->ik", a_meta, b_cpu).device]
    first, second = captured.calls
    assert (first.devices, second.devices) == (("cpu", "meta"), ("meta", "cpu"))
    assert [first.device, second.device] == [str(device) for device in ran_on]
    assert first.unplanned is not None
    assert first.unplanned == ("operands on cpu and meta: the drop-in runs torch.einsum for "
                               f"operands on several devices (it ran the call on {ran_on[0]})")
    report = captured.report()
    assert report.ranking == () and not report.batch.has_errors
    assert report.not_planned == (("einsum1", first), ("einsum2", second))
    with pytest.raises(EinsumAnalyzeError, match="plans none of the 2 captured calls"):
        captured.save(Path("/nonexistent/never-written.json"))


def test_a_call_on_two_devices_that_torch_einsum_refuses_is_not_recorded() -> None:
    with capture() as captured:
        with pytest.raises(RuntimeError, match="device"):
            torch.einsum("ij,->ij", torch.randn(2, 3, device="meta"), torch.tensor(2.0))
    assert captured.calls == []
