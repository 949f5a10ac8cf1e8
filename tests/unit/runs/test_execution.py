"""Execution on the CPU: runs of every strategy and baseline, memory, errors, safety, JSON.

Small cases and few repeats: these check what is measured and reported, not speed.
"""

from __future__ import annotations

import json

import pytest
import torch
from budgets import examples
from click.testing import CliRunner
from corpus import small_cases
from hypothesis import given, settings
from report_schema import validate_report
from strategies import einsum_problems

import einsum_analyze.execution as execution
from einsum_analyze import BackendUnavailableError, analyze, execute
from einsum_analyze.backends import backend_names, get_backend, register_backend
from einsum_analyze.backends.base import Run, make_context
from einsum_analyze.cli import cli
from einsum_analyze.execution import BASELINES, predicted_peak, resolve_devices

CHAIN = ("ab,bc,cd->ad", [(4, 5), (5, 6), (6, 3)])
DIAG = ("ijj,k->ik", [(4, 3, 3), (5,)])
FAST = {"devices": ["cpu"], "repeats": 2, "warmup": 0}
OURS = ("reverse", "independent")
RUN_KEYS = {"strategy", "device", "backend", "forward_s", "backward_s", "peak_bytes_measured",
            "peak_bytes_predicted", "max_grad_error"}
TIMING_KEYS = {"median", "p25", "p75", "iqr", "min", "max", "blocks", "calls_per_block",
               "warmup_calls", "fence"}


def by_strategy(report) -> dict[str, Run]:
    runs = {run.strategy: run for run in report.runs}
    assert len(runs) == len(report.runs), "one run per strategy and device"
    return runs


@pytest.fixture(scope="module")
def chain32():
    return execute(analyze(*CHAIN, dtype="float32"), **FAST)


@pytest.fixture(scope="module")
def diag64():
    return execute(analyze(*DIAG, dtype="float64"), **FAST)


# --- what runs -------------------------------------------------------------------------------


def test_every_strategy_and_baseline_runs_on_cpu(chain32):
    runs = by_strategy(chain32)
    assert set(runs) == {*OURS, *BASELINES}
    for name, run in runs.items():
        assert run.skipped is None, run.skipped
        assert run.device == "cpu"
        assert run.backend == "torch"
        assert run.is_baseline == (name in BASELINES)
        assert run.forward is not None and run.forward.median_s > 0
        assert run.backward is not None and run.backward.median_s > 0
        assert len(run.forward.block_times_s) == 2
        assert run.backward.calls_per_block == 1  # backward needs a fresh forward each call


def test_our_runs_hold_exactly_the_predicted_bytes_on_cpu(chain32):
    strategies = {s.name: s for s in chain32.strategies}
    for name in OURS:
        run = by_strategy(chain32)[name]
        assert run.peak_bytes_measured == run.peak_bytes_predicted
        assert run.peak_bytes_predicted == strategies[name].memory.peak_bytes  # inputs in
        assert "profile_memory" in run.memory_measurement
        assert run.retained_bytes_measured == run.retained_bytes_predicted
        assert run.retained_bytes_predicted == strategies[name].memory.retained_bytes


def test_float32_gradients_are_close(chain32):
    for run in chain32.runs:
        assert run.max_grad_error is not None
        assert 0 <= run.max_grad_error < 1e-5


def test_float64_gradients_are_exact(diag64):
    runs = by_strategy(diag64)
    assert set(runs) == {*OURS, *BASELINES}
    for run in runs.values():
        assert run.skipped is None
        assert run.max_grad_error < 1e-12
    for name in OURS:
        assert runs[name].peak_bytes_measured == runs[name].peak_bytes_predicted


def test_baselines_measure_retained_bytes_with_hooks(chain32):
    runs = by_strategy(chain32)
    for name in BASELINES:
        run = runs[name]
        assert run.retained_bytes_measured is not None and run.retained_bytes_measured > 0
        # The allocator's peak, inputs included: above the inputs and what autograd saves.
        inputs = chain32.forward_memory.input_bytes
        assert run.peak_bytes_measured is not None
        assert run.peak_bytes_measured >= inputs + run.retained_bytes_measured
        assert "saved_tensors_hooks" in run.memory_measurement
        assert "profile_memory" in run.memory_measurement


def test_opt_einsum_baseline_keeps_at_least_the_modelled_bytes(chain32):
    # Same path as the model; torch may add permuted copies the model leaves out.
    run = by_strategy(chain32)["opt_einsum-torch"]
    assert run.retained_bytes_measured >= run.retained_bytes_predicted > 0


def test_partial_gradients():
    report = execute(analyze(*CHAIN, dtype="float64", grad="1"), **FAST)
    runs = by_strategy(report)
    for run in runs.values():
        assert run.skipped is None and run.max_grad_error < 1e-12
    for name in OURS:
        assert runs[name].peak_bytes_measured == runs[name].peak_bytes_predicted
        assert runs[name].retained_bytes_measured == runs[name].retained_bytes_predicted


def test_cuda_prediction_rounds_every_allocation():
    report = analyze(*CHAIN)
    for strategy in report.strategies:
        on_cpu = predicted_peak(report, strategy, is_cuda=False)
        on_cuda = predicted_peak(report, strategy, is_cuda=True)
        assert on_cpu == strategy.memory.peak_bytes
        assert on_cuda % execution.CUDA_GRANULARITY == 0
        # Every tensor of this case, the three operands too, is below 512 B: each costs
        # one 512-byte block.
        assert on_cuda >= on_cpu
        assert on_cuda == 512 * (3 + max_live_blocks(strategy))


def max_live_blocks(strategy) -> int:
    live: set[str] = set()
    caller: set[str] = set()  # the caller's upstream gradient: held until backward ends
    let_go = 0
    top = 0
    for event in strategy.events:
        if event.kind == "alloc":
            live.add(event.tensor)
            if event.op == "seed":
                caller.add(event.tensor)
            for name, _ in event.consumes:
                live.discard(name)
                if name in caller:
                    caller.add(event.tensor)
            top = max(top, len(live) + let_go + len(event.workspace))
        else:
            live.discard(event.tensor)
            let_go += event.tensor in caller
    return top


def test_without_gradients_nothing_runs_backward():
    report = execute(analyze(*DIAG, dtype="float64", grad="none"), **FAST)
    for run in report.runs:
        assert run.skipped is None
        assert run.backward is None
        assert run.max_grad_error is None
        assert run.forward is not None


def test_numpy_backend_runs_ours_and_no_baseline():
    report = execute(analyze(*DIAG, dtype="float64"), backend="numpy", **FAST)
    runs = by_strategy(report)
    assert set(runs) == set(OURS)
    for run in runs.values():
        assert run.backend == "numpy"
        assert run.device == "cpu"
        assert run.skipped is None
        assert run.max_grad_error < 1e-12
        # tracemalloc also sees the Python objects of the numpy calls: never less.
        assert run.peak_bytes_measured >= run.peak_bytes_predicted
        assert run.retained_bytes_measured == run.retained_bytes_predicted
        assert "tracemalloc" in run.memory_measurement


def test_numpy_backend_on_a_broadcast_view_gradient(monkeypatch):
    # The gradient of the (1, 4, 4, 2) operand is its core result viewed with a size-1
    # broadcast label: contiguous and read-only in numpy.
    real = torch.from_numpy

    def from_numpy(array):
        assert array.flags.writeable, "torch.from_numpy of a read-only array"
        return real(array)

    monkeypatch.setattr(torch, "from_numpy", from_numpy)
    report = analyze("...ij,...jk->...ik", [(8, 1, 3, 4), (1, 4, 4, 2)], dtype="float64")
    runs = execute(report, backend="numpy", **FAST).runs
    assert all(run.skipped is None and run.max_grad_error < 1e-12 for run in runs)


def test_progress_names_every_run():
    seen: list[str] = []
    execute(analyze(*DIAG, dtype="float64", grad="none"), on_progress=seen.append, **FAST)
    assert len(seen) == 4
    assert any("reverse" in label for label in seen)
    assert any("opt_einsum-torch" in label for label in seen)


# --- refusals --------------------------------------------------------------------------------


def test_bfloat16_with_numpy_is_refused():
    report = analyze(*DIAG, dtype="bfloat16")
    with pytest.raises(BackendUnavailableError, match="bfloat16"):
        execute(report, backend="numpy", **FAST)


def test_unknown_backend_is_refused():
    with pytest.raises(BackendUnavailableError, match="jax"):
        execute(analyze(*DIAG), backend="jax", **FAST)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_a_gpu_is_refused(device):
    with pytest.raises(BackendUnavailableError, match="CUDA"):
        execute(analyze(*DIAG), devices=[device], repeats=2, warmup=0)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu"])
def test_unknown_device_is_refused(device):
    with pytest.raises(BackendUnavailableError):
        resolve_devices([device])


def test_default_devices():
    expected = ("cpu", "cuda:0") if torch.cuda.is_available() else ("cpu",)
    assert resolve_devices(None) == expected
    assert resolve_devices([" CPU ", "cpu"]) == ("cpu",)


def test_tiny_max_memory_skips_every_run_with_its_reason():
    report = execute(analyze(*CHAIN), max_memory=16, **FAST)
    assert {run.strategy for run in report.runs} == {*OURS, *BASELINES}
    for run in report.runs:
        assert run.skipped is not None and "exceeds" in run.skipped
        assert "--max-memory" in run.skipped
        assert run.forward is None and run.peak_bytes_measured is None
    assert execute(analyze(*CHAIN), max_memory="16B", **FAST).runs[0].skipped is not None


def test_max_memory_skips_only_the_runs_above_it():
    # On CHAIN every strategy ends at the same peak (inputs, output, upstream gradient
    # and every gradient); one more operand separates them.
    analysis = analyze("ab,bc,cd,de->ae", [(4, 5), (5, 6), (6, 3), (3, 2)])
    peaks = {s.name: s.memory.peak_bytes for s in analysis.strategies}
    assert peaks["reverse"] < peaks["independent"]
    report = execute(analysis, max_memory=peaks["reverse"], **FAST)
    runs = by_strategy(report)
    assert runs["reverse"].skipped is None  # at the limit: runs
    assert runs["independent"].skipped is not None and "exceeds" in runs["independent"].skipped
    assert str(peaks["independent"]) in runs["independent"].skipped


def test_huge_flop_case_on_cpu_needs_force(monkeypatch):
    # A deliberately slow "CPU" makes a tiny case far beyond reason without running it.
    monkeypatch.setattr(execution, "CPU_FLOPS_PER_S", 1e-3)
    report = execute(analyze(*CHAIN), **FAST)
    assert len(report.runs) == 4
    for run in report.runs:
        assert run.skipped is not None and "--force" in run.skipped
        assert "cpu" in run.skipped
        assert run.forward is None
    forced = execute(analyze(*CHAIN), force=True, **FAST)
    assert all(run.skipped is None for run in forced.runs)


def test_refused_runs_allocate_nothing(monkeypatch):
    monkeypatch.setattr(execution, "CPU_FLOPS_PER_S", 1e-3)
    calls = {"randn": 0, "einsum": 0}
    real_randn, real_einsum = torch.randn, torch.einsum

    def randn(*args, **kwargs):
        calls["randn"] += 1
        return real_randn(*args, **kwargs)

    def einsum(*args, **kwargs):
        calls["einsum"] += 1
        return real_einsum(*args, **kwargs)

    monkeypatch.setattr(torch, "randn", randn)
    monkeypatch.setattr(torch, "einsum", einsum)
    report = execute(analyze(*CHAIN), **FAST)
    assert all(run.skipped for run in report.runs)
    assert calls == {"randn": 0, "einsum": 0}


def test_bad_repeats_are_refused():
    from einsum_analyze import PlanningError

    with pytest.raises(PlanningError):
        execute(analyze(*DIAG), devices=["cpu"], repeats=0)
    with pytest.raises(PlanningError):
        execute(analyze(*DIAG), devices=["cpu"], warmup=-1)


# --- JSON ------------------------------------------------------------------------------------


def test_report_with_runs_validates_against_the_schema(chain32):
    data = chain32.to_dict()
    validate_report(data)
    assert len(data["runs"]) == 4
    for entry in data["runs"]:
        assert RUN_KEYS <= set(entry)
        assert TIMING_KEYS <= set(entry["forward_s"])
    json.dumps(data, allow_nan=False)


def test_skipped_runs_validate_against_the_schema():
    data = execute(analyze(*CHAIN), max_memory=16, **FAST).to_dict()
    validate_report(data)
    assert all(entry["skipped"] and entry["forward_s"] is None for entry in data["runs"])


def test_run_to_dict():
    run = Run(strategy="reverse", is_baseline=False, device="cpu", backend="torch",
              skipped="predicted peak 10 B exceeds --max-memory 1 B")
    assert run.to_dict() == {
        "strategy": "reverse",
        "baseline": False,
        "device": "cpu",
        "backend": "torch",
        "forward_s": None,
        "backward_s": None,
        "peak_bytes_measured": None,
        "peak_bytes_predicted": None,
        "retained_bytes_measured": None,
        "retained_bytes_predicted": None,
        "max_grad_error": None,
        "skipped": "predicted peak 10 B exceeds --max-memory 1 B",
        "memory_measurement": "",
        "note": None,
        "predicted": None,
    }


# --- the command line ------------------------------------------------------------------------

CLI_CASE = ["ab,bc,cd->ad", "--shapes", "4x5,5x6,6x3"]
CLI_RUN = ["--device", "cpu", "--repeats", "2", "--warmup", "0", "--json", "-"]


def test_cli_json_has_the_runs():
    result = CliRunner().invoke(cli, [*CLI_CASE, *CLI_RUN], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    validate_report(data)
    runs = data["runs"]
    assert isinstance(runs, list)
    assert {entry["strategy"] for entry in runs} == {*OURS, *BASELINES}
    for entry in runs:
        assert RUN_KEYS <= set(entry)
        assert entry["device"] == "cpu"
        assert entry["backend"] == "torch"
        assert entry["forward_s"]["median"] > 0
        assert entry["backward_s"]["median"] > 0
        assert entry["max_grad_error"] < 1e-5
        if entry["strategy"] in OURS:
            assert entry["peak_bytes_measured"] == entry["peak_bytes_predicted"]


def test_cli_numpy_float64():
    args = [*CLI_CASE, "--backend", "numpy", "--dtype", "float64", *CLI_RUN]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [(entry["strategy"], entry["backend"]) for entry in runs] == [
        ("reverse", "numpy"), ("independent", "numpy")]
    assert all(entry["max_grad_error"] < 1e-12 for entry in runs)


def test_cli_device_none_is_analysis_only():
    args = [*CLI_CASE, "--device", "none", "--json", "-"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert "runs" not in data
    assert [s["name"] for s in data["strategies"]] == ["reverse", "independent",
                                                       "torch-autograd"]


def test_cli_max_memory_skips_runs():
    args = [*CLI_CASE, "--max-memory", "16B", *CLI_RUN]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert runs and all("exceeds" in entry["skipped"] for entry in runs)


@pytest.mark.parametrize(
    ("extra", "culprit"),
    [
        (["--backend", "numpy", "--dtype", "bfloat16"], "bfloat16"),
        (["--device", "none,cpu"], "--device none"),
        (["--device", "tpu"], "tpu"),
        *([] if torch.cuda.is_available() else [(["--device", "cuda"], "CUDA")]),
    ],
)
def test_cli_execution_errors_are_one_line(extra, culprit):
    args = [*CLI_CASE, *extra, "--repeats", "2", "--warmup", "0", "--json", "-"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error:")
    assert result.stderr.count("\n") == 1, result.stderr
    assert culprit in result.stderr


def test_non_ascii_labels_run_everywhere():
    # torch.einsum takes ASCII letters only: the oracle and the torch.einsum baseline get
    # the equation relabelled, and the run says so.
    report = execute(analyze("αβ,βγ->αγ", [(3, 4), (4, 5)], strategies=("reverse",)),
                     devices=["cpu"], repeats=1, warmup=0)
    runs = by_strategy(report)
    assert set(runs) == {"reverse", *BASELINES}
    for run in runs.values():
        assert run.skipped is None, run.skipped
        assert run.max_grad_error is not None and run.max_grad_error < 1e-5
    assert runs["torch-autograd"].note is not None and "'ab,bc->ac'" in runs["torch-autograd"].note
    assert runs["reverse"].note is None


def test_more_than_52_labels_run_everywhere():
    # 53 distinct labels: no single torch.einsum call can take them; the oracle and the
    # torch.einsum baseline contract pairwise with opt_einsum (backend torch).
    labels = [chr(0x3B1 + k) for k in range(25)] + list("abcdefghijklmnopqrstuvwxyzAB")
    assert len(set(labels)) == 53
    equation = ",".join(a + b for a, b in zip(labels, labels[1:], strict=False))
    equation += "->" + labels[0] + labels[-1]
    report = execute(analyze(equation, [(2, 2)] * 52, dtype="float64"), devices=["cpu"],
                     repeats=1, warmup=0)
    runs = by_strategy(report)
    assert set(runs) == {*OURS, *BASELINES}
    for run in runs.values():
        assert run.skipped is None, run.skipped
        assert run.max_grad_error is not None and run.max_grad_error < 1e-10
    assert "52" in (runs["torch-autograd"].note or "")
    for name in OURS:
        assert runs[name].peak_bytes_measured == runs[name].peak_bytes_predicted


def test_a_step_over_52_labels_runs_everywhere():
    # One pairwise step holds 57 labels: no torch.einsum call can take it, in the oracle
    # or in either baseline (it used to end in a traceback).
    labels = [chr(0x3B1 + k) for k in range(25)] + list("abcdefghijklmnopqrstuvwxyzAB")
    equation = "".join(labels[:30]) + "X," + "".join(labels[20:]) + "XY->XY"
    shapes = [(1,) * 30 + (3,), (1,) * 33 + (3, 2)]
    report = execute(analyze(equation, shapes, dtype="float64"), devices=["cpu"],
                     repeats=1, warmup=0)
    runs = by_strategy(report)
    assert set(runs) == {*OURS, *BASELINES}
    for run in runs.values():
        assert run.skipped is None, run.skipped
        assert run.max_grad_error is not None and run.max_grad_error < 1e-12
    assert runs["opt_einsum-torch"].note is not None


# --- the executor seam -----------------------------------------------------------------------


def test_registry_lists_torch_and_numpy_and_refuses_unknown_names():
    assert backend_names()[:2] == ("torch", "numpy")
    with pytest.raises(BackendUnavailableError, match="torch, numpy"):
        get_backend("jax")


def test_cli_backend_choices_come_from_the_registry():
    result = CliRunner().invoke(cli, ["--help"])
    assert "[" + "|".join(backend_names()) + "]" in result.stdout


def test_a_registered_backend_runs_through_execute():
    class Counting(type(get_backend("numpy"))):  # type: ignore[misc]
        name = "counting"
        calls = 0

        def forward(self, program):
            Counting.calls += 1
            return super().forward(program)

    register_backend("counting", Counting, "test only")
    try:
        report = execute(analyze(*DIAG, dtype="float64"), backend="counting", **FAST)
    finally:
        from einsum_analyze.backends import registry

        del registry._FACTORIES["counting"]
    assert [run.backend for run in report.runs] == ["counting", "counting"]
    assert all(run.max_grad_error < 1e-12 for run in report.runs)
    assert Counting.calls > 0


def test_numpy_backend_module_does_not_import_torch():
    import ast
    from pathlib import Path

    import einsum_analyze.backends.numpy_backend as numpy_backend

    tree = ast.parse(Path(numpy_backend.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0}
    assert "torch" not in imported
    assert "numpy" in imported


def _allocator_figures(case_equation, shapes, dtype):
    """(measured peak, predicted peak, measured retained, predicted retained, max error)
    of every strategy of ours, from the torch executor's allocator measurement."""
    report = analyze(case_equation, shapes, dtype=dtype)
    eq = report.equation
    grad = report.gradients.operands if report.gradients else tuple(range(eq.num_operands))
    context = make_context(device="cpu", dtype=dtype, shapes=eq.shapes,
                           output_shape=[eq.size_dict[c] for c in eq.output], text=eq.text,
                           explicit=eq.explicit, seed=1, grad=grad)
    executor = get_backend("torch")
    figures = {}
    for strategy in report.strategies:
        if strategy.name == "torch-autograd":
            continue
        program = executor.compile(strategy.events, eq.size_dict, context)
        memory = executor.measure_memory(program)
        state = executor.backward(program, executor.prepare_backward(
            program, executor.forward(program)))
        gradients = executor.gradients(program, state)
        error = max((execution_error(gradients[k], context.oracle[k]) for k in grad),
                    default=0.0)
        figures[strategy.name] = (
            memory.peak_bytes_without_inputs + context.input_bytes,
            predicted_peak(report, strategy, is_cuda=False),
            memory.retained_bytes, strategy.memory.retained_bytes, error,
        )
    return figures


def execution_error(got, want) -> float:
    from einsum_analyze.backends.base import relative_error

    return relative_error(got, want)


# complex64 leaves out tn18-b512 (seconds on a small CPU); tests/gpu runs it on CUDA.
CORPUS_RUNS = [(case, "float32") for case in small_cases(50_000)] + [
    (case, "complex64") for case in small_cases(10_000)]


@pytest.mark.parametrize(("case", "dtype"), CORPUS_RUNS,
                         ids=[f"{c.name}-{d}" for c, d in CORPUS_RUNS])
def test_allocator_peak_equals_prediction_on_the_corpus(case, dtype):
    for name, (peak, predicted, retained, kept, error) in _allocator_figures(
            case.equation, case.shapes, dtype).items():
        assert peak == predicted, (name, peak, predicted)
        assert retained == kept, (name, retained, kept)
        assert error < 1e-4, (name, error)


def test_complex_conjugation_makes_no_hidden_copy():
    # torch.sum of a lazily conjugated 512x512 complex64 tensor copied it (2 MiB) when
    # the model said 12,296 B above the inputs (16,392 B now that the caller's upstream
    # gradient, 4 KiB, counts beside the seed's copy of it).
    figures = _allocator_figures(",ij->i", [(), (512, 512)], "complex64")
    inputs = 8 + 512 * 512 * 8
    for name, (peak, predicted, _, _, error) in figures.items():
        assert peak == predicted, name
        assert peak - inputs < 20_480, (name, peak - inputs)
        assert error < 1e-5


@settings(max_examples=examples(25), deadline=None)
@given(problem=einsum_problems())
def test_allocator_peak_equals_prediction_on_random_complex_equations(problem):
    for name, (peak, predicted, retained, kept, error) in _allocator_figures(
            problem.equation, problem.shapes, "complex64").items():
        assert peak == predicted, (problem.equation, name)
        assert retained == kept, (problem.equation, name)
        assert error < 1e-3, (problem.equation, name, error)


def test_the_worked_example_backend_runs():
    # docs/backends.md's example: one module, one registration, run as written.
    import re
    from pathlib import Path

    text = (Path(__file__).parents[3] / "docs" / "backends.md").read_text()
    section = text.split("## Worked example: adding a backend", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    import sys
    import types

    module = types.ModuleType("numpy_buffers")
    sys.modules["numpy_buffers"] = module
    try:
        exec(compile(blocks[0] + blocks[1], "docs/backends.md", "exec"), module.__dict__)
        assert "numpy-buffers" in backend_names()
        report = execute(analyze(*CHAIN, dtype="float64"), backend="numpy-buffers", **FAST)
    finally:
        from einsum_analyze.backends import registry

        registry._FACTORIES.pop("numpy-buffers", None)
        del sys.modules["numpy_buffers"]
    assert [run.backend for run in report.runs] == ["numpy-buffers", "numpy-buffers"]
    for run in report.runs:
        assert run.max_grad_error < 1e-12
        assert run.memory_measurement.startswith("numpy buffers")
        assert run.peak_bytes_measured > report.forward_memory.input_bytes


# --- equations torch.einsum cannot read ------------------------------------------------------


def _pairwise_steps():
    """Every pairwise step of the corpus's small equations, as opt_einsum plans them."""
    import opt_einsum

    from einsum_analyze.model.equation import parse_equation

    steps = []
    for case in small_cases(5_000):
        eq = parse_equation(case.equation, case.shapes)
        _, info = opt_einsum.contract_path(eq.explicit, *eq.shapes, shapes=True)
        shapes = [tuple(s) for s in eq.shapes]
        for positions, _, equation, _, _ in info.contraction_list:
            picked = [shapes.pop(p) for p in positions]
            size = {c: n for term, shape in zip(equation.split("->")[0].split(","), picked,
                                                strict=True) for c, n in zip(term, shape,
                                                                             strict=True)}
            steps.append((case.name, equation, picked))
            shapes.append(tuple(size[c] for c in equation.split("->")[1]))
    return steps


PAIRWISE = _pairwise_steps()


@pytest.mark.parametrize(("name", "equation", "shapes"), PAIRWISE,
                         ids=[f"{n}:{e}" for n, e, _ in PAIRWISE])
def test_contract_step_equals_torch_einsum(name, equation, shapes):
    # The path for steps over 52 labels, checked where torch.einsum can answer too.
    from einsum_analyze.backends.relabel import ascii_equation, contract_step

    generator = torch.Generator().manual_seed(0)
    tensors = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
    got = contract_step(equation, tensors)
    want = torch.einsum(ascii_equation(equation), *tensors)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_contract_along_path_on_a_step_wider_than_52_labels():
    # 60 labels, 54 of size 1: the same contraction without them fits torch.einsum.
    from einsum_analyze.backends.relabel import contract_along_path, widest_step

    wide = [chr(0x3B1 + k) for k in range(54)]
    a_term = "ij" + "".join(wide[:30]) + "kk"
    b_term = "jl" + "".join(wide[24:]) + "m"
    out = "il" + "".join(wide[:3]) + "".join(wide[50:])
    sizes = {"i": 2, "j": 3, "k": 2, "l": 4, "m": 3} | dict.fromkeys(wide, 1)
    explicit = f"{a_term},{b_term}->{out}"
    assert widest_step(explicit, [[sizes[c] for c in a_term], [sizes[c] for c in b_term]]) > 52
    generator = torch.Generator().manual_seed(0)
    a = torch.randn([sizes[c] for c in a_term], generator=generator, dtype=torch.float64)
    b = torch.randn([sizes[c] for c in b_term], generator=generator, dtype=torch.float64)
    got = contract_along_path(explicit, [a.requires_grad_(), b.requires_grad_()])
    want = torch.einsum("ijkk,jlm->il", a.reshape(2, 3, 2, 2), b.reshape(3, 4, 3))
    assert torch.allclose(got.reshape(want.shape), want)
    got.sum().backward()  # differentiable: the oracle goes through it
    assert a.grad is not None and b.grad is not None


def test_predicted_retained_bytes_round_as_cudas_allocator_does():
    # ab,bc,cd->ad on the path (0,1),(0,1): x3 = ac (2x5 float32 = 40 B) is kept for
    # backward; CUDA's caching allocator holds it in one 512-byte block.
    from einsum_analyze.execution import predicted_retained

    report = analyze("ab,bc,cd->ad", [(2, 3), (3, 5), (5, 7)], optimize=[(0, 1), (0, 1)],
                     strategies=("reverse",))
    (reverse,) = report.strategies
    assert predicted_retained(reverse, report, False) == reverse.memory.retained_bytes == 40
    assert predicted_retained(reverse, report, True) == 512
