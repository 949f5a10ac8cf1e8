"""docs/benchmarks.md's tables and summary lines are what the benchmark script writes from
the saved results: nobody edits them by hand, so they cannot drift from the data."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
SECTIONS = {"h200": "docs/results/bench_cuda_h200.json", "cpu": "docs/results/bench_cpu_2core.json"}


def bench_execution():
    spec = importlib.util.spec_from_file_location(
        "bench_execution", ROOT / "benchmarks" / "bench_execution.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_section_is_what_the_script_writes(section):
    bench = bench_execution()
    text = PAGE.read_text(encoding="utf-8")
    begin, end = bench.begin_marker(section), bench.end_marker(section)
    assert begin in text and end in text
    shown = text.split(begin + "\n", 1)[1].split(end, 1)[0]
    saved = json.loads((ROOT / SECTIONS[section]).read_text(encoding="utf-8"))
    assert shown == bench.markdown(saved)


def test_prose_cites_the_generated_summary():
    bench = bench_execution()
    saved = json.loads((ROOT / SECTIONS["h200"]).read_text(encoding="utf-8"))
    first = bench.summary_lines(saved["results"])[0]  # reverse vs torch-autograd
    geomean = first.split("geometric mean ")[1].split("x")[0]
    assert f"Met: {geomean}x" in PAGE.read_text(encoding="utf-8")
