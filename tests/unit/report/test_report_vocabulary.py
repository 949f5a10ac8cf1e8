"""One vocabulary in the report: peaks count the inputs, names match the terminal."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from rich.console import Console

from einsum_analyze import analyze
from einsum_analyze.render.report import render_batch, render_report
from einsum_analyze.report import SCHEMA_VERSION, load_schema

TN = ("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)])


def _peaks(section: dict[str, Any]) -> dict[str, int]:
    return {key: value for key, value in section.items()
            if "peak_bytes" in key and isinstance(value, int)}


def test_every_peak_counts_the_inputs_and_only_without_inputs_twins_do_not() -> None:
    data = analyze(*TN).to_dict()
    inputs = data["forward"]["input_bytes"]
    assert inputs == (1024 + 1024 + 14 + 98) * 4
    sections = [("forward", data["forward"])]
    sections += [(f"strategy {s['name']}", s) for s in data["strategies"]]
    checked = 0
    for where, section in sections:
        peaks = _peaks(section)
        assert peaks, where
        for key, value in peaks.items():
            if key.endswith("_without_inputs"):
                twin = key.removesuffix("_without_inputs")
                assert section[twin] - value == inputs, (where, key)
            else:
                # A peak with the inputs: at least the inputs plus the forward output.
                assert value >= inputs + data["forward"]["output_bytes"], (where, key)
            checked += 1
    assert checked == 3 + 3 * 3  # forward: 3 peaks; each strategy: 3


def test_retained_bytes_are_beyond_the_inputs_not_a_peak() -> None:
    data = analyze(*TN, strategies=("independent",)).to_dict()
    (independent,) = data["strategies"]
    assert independent["retained_bytes"] == 0  # keeps nothing: the inputs are not counted


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [0, 1, 2, 3]),
        ({"grad": "2,0"}, [0, 2]),
        ({"grad": "none"}, []),
        ({"strategies": ("reverse",), "grad": "3"}, [3]),
        ({"strategies": ()}, []),
        ({"strategies": (), "grad": "1"}, []),  # no backward modelled: --grad is not read
    ],
)
def test_grad_operands_is_always_present(kwargs: dict[str, Any], expected: list[int]) -> None:
    data = analyze(*TN, **kwargs).to_dict()
    assert data["grad_operands"] == expected
    jsonschema.Draft202012Validator(load_schema()).validate(data)


def test_grad_operands_is_required_by_the_schema() -> None:
    data = analyze(*TN).to_dict()
    del data["grad_operands"]
    with pytest.raises(jsonschema.ValidationError, match="'grad_operands' is a required"):
        jsonschema.Draft202012Validator(load_schema()).validate(data)


def test_steps_say_summed_in_json_and_in_the_terminal() -> None:
    report = analyze(*TN, strategies=())
    data = report.to_dict()
    assert data["schema_version"] == SCHEMA_VERSION == 2
    steps = data["forward"]["steps"]
    assert [step["summed"] for step in steps] == [s.summed for s in report.plan.steps]
    assert [step["summed"] for step in steps] == ["", "m", "dc"]
    assert all("removed" not in step for step in steps)
    console = Console(record=True, width=200)
    render_report(report, console)
    text = console.export_text()
    assert "summed" in text and "removed" not in text


def test_terminal_headers_say_whether_inputs_are_counted() -> None:
    report = analyze(*TN)
    console = Console(record=True, width=200)
    render_report(report, console)
    text = console.export_text()
    memory = report.forward_memory
    for label, value in (("peak (incl. inputs)", "30.55 KiB"),
                         ("peak without inputs", "22.11 KiB")):
        line = next(line for line in text.splitlines() if label in line)
        assert value in line
    assert memory.peak_bytes == 31_280
    assert "train peak (incl. inputs)" in text
    assert "peak above inputs" not in text and "inputs included" not in text


def test_batch_table_says_its_peak_counts_the_inputs() -> None:
    from einsum_analyze.analysis import run_cases
    from einsum_analyze.report.cases import parse_cases

    batch = run_cases(parse_cases('[{"name": "mm", "equation": "ab,bc->ac", '
                                  '"shapes": [[2, 3], [3, 4]]}]', "json"))
    console = Console(record=True, width=200)
    render_batch(batch, console)
    text = console.export_text()
    assert "peak (incl. inputs)" in text and "peaks include the inputs" in text
