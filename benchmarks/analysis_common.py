"""Helpers of bench_analysis.py: the shared cases, sample statistics, formats, tables, the
environment a run records, and the in-process section's ways around the parser."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_PATH = HERE / "cases.json"


def load_cases(path: Path = CASES_PATH) -> dict[str, Any]:
    """Read ``benchmarks/cases.json``."""
    with open(path, encoding="utf-8") as stream:
        data: dict[str, Any] = json.load(stream)
    return data


def find_case(cases: dict[str, Any], name: str) -> dict[str, Any]:
    """The case called ``name``."""
    for case in cases["cases"]:
        if case["name"] == name:
            return dict(case)
    raise SystemExit(f"case {name!r} is not in {CASES_PATH}")


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, IQR, min and max of ``samples``."""
    ordered = sorted(samples)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return {
        "median": statistics.median(ordered),
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
    }


def fmt_s(seconds: float) -> str:
    """Seconds with 3 significant digits, in s or ms."""
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms"


def fmt_ms(seconds: float) -> str:
    """Milliseconds with 3 significant digits (no unit)."""
    value = seconds * 1e3
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table whose columns are padded for reading in a terminal."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    for row in rows:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    """Versions, platform, CPU and load of this run."""
    import numpy
    import opt_einsum

    env: dict[str, Any] = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "platform": platform.platform(),
        "processor": _cpu_model() or platform.processor() or "unknown",
        "cpu_count": os.cpu_count(),
    }
    if hasattr(os, "sched_getaffinity"):
        env["cpus_usable"] = len(os.sched_getaffinity(0))
    if hasattr(os, "getloadavg"):
        env["load_average_1_5_15min"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    env["opt_einsum"] = opt_einsum.__version__
    env["numpy"] = numpy.__version__
    try:
        import einsum_analyze

        env["einsum_analyze"] = (
            f"{einsum_analyze.__version__} ({Path(einsum_analyze.__file__).parent})"
        )
    except Exception as err:  # noqa: BLE001 - report, do not crash
        env["einsum_analyze"] = f"import failed: {err}"
    env["git"] = _git_state()
    env["PYTHONDONTWRITEBYTECODE"] = os.environ.get("PYTHONDONTWRITEBYTECODE", "(unset)")
    return env


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            for line in stream:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _git_state() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "einsum_analyze"],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" (einsum_analyze/ has uncommitted changes)" if dirty else "")


def direct_equation(eq: str, shapes: Sequence[tuple[int, ...]]) -> Any:
    """An ``Equation`` built without the parser (plain explicit equations only)."""
    from einsum_analyze.model.equation import Equation

    lhs, out = eq.split("->")
    terms = lhs.split(",")
    size_dict: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        size_dict.update(zip(term, shape, strict=True))
    return Equation(
        text=eq,
        terms=tuple(terms),
        output=out,
        shapes=tuple(tuple(s) for s in shapes),
        size_dict=size_dict,
    )


@contextlib.contextmanager
def parser_bypassed(equation: Any) -> Iterator[None]:
    """Make ``analyze`` use ``equation`` instead of parsing its text."""
    import einsum_analyze.analysis as analysis

    original = analysis.parse_equation
    analysis.parse_equation = lambda text, shapes: equation
    try:
        yield
    finally:
        analysis.parse_equation = original


def raw_path_fn(eq: str, shapes: Sequence[tuple[int, ...]], opt: str) -> Callable[[], Any]:
    """opt_einsum's path finder alone, on prebuilt index sets."""
    from opt_einsum import paths

    lhs, out = eq.split("->")
    terms = lhs.split(",")
    size_dict: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        size_dict.update(zip(term, shape, strict=True))
    inputs = [frozenset(t) for t in terms]
    output = frozenset(out)
    path_fn = paths.get_path_fn(opt)
    return lambda: path_fn(inputs, output, size_dict, None)
