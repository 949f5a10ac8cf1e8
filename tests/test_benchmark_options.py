"""A benchmark given a case (or model) it does not have says so in one line and exits 2.

Every script that takes ``--cases`` (``--case``, ``--models``) checks the names through
benchmarks/_common.py before it runs anything: nothing on stdout, one line on stderr that
names the unknown name, exit status 2. Each script's ``main`` runs here, in this process,
with its command line.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"

OPTIONS = [
    ("bench_dropin", "--cases"),
    ("bench_graph_overhead", "--cases"),
    ("bench_execution", "--cases"),
    ("bench_overhead", "--cases"),
    ("bench_training", "--cases"),
    ("bench_slicing", "--cases"),
    ("bench_budgets", "--cases"),
    ("bench_budget_space", "--cases"),
    ("bench_recompute", "--cases"),
    ("bench_roofline", "--cases"),
    ("bench_time_model", "--cases"),
    ("bench_distributed", "--case"),
    ("bench_models", "--models"),
]


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exit_status(main: Any) -> object:
    try:
        return main()
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize(("script", "option"), OPTIONS, ids=[s for s, _ in OPTIONS])
def test_an_unknown_case_is_one_line_and_exit_2(script: str, option: str,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    module = _script(script)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", option, "NOSUCH"])
    status = _exit_status(module.main)
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"{option}: unknown 'NOSUCH' (known: "), line


def test_known_names_pass_in_the_files_order_and_each_once() -> None:
    common = _script("_common")
    cases = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    assert common.select_cases(cases, "c, a,c") == [cases[0], cases[2]]
    assert common.select_cases(cases, "") == cases
    assert common.wanted_names("c,a,c", ["a", "b", "c"]) == ["c", "a"]


def test_every_unknown_name_is_in_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    common = _script("_common")
    with pytest.raises(SystemExit) as stop:
        common.wanted_names("a,x,y", ["a", "b"], option="--cases")
    assert stop.value.code == 2
    assert capsys.readouterr().err == "--cases: unknown 'x', 'y' (known: a, b)\n"
