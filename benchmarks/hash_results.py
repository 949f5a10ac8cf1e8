"""One hash per analysis of a fixed set, to check that a speed change keeps every result.

Each line is a case's name and a hash of what its analysis found: every strategy's
events (kernels included), memory replay and FLOPs, the forward and inference memory,
the warnings, and the report's JSON without its timings, environment and warnings (or
the refusal's message). Run it with the code before and after a change and compare:

    PYTHONPATH=OLD python benchmarks/hash_results.py > before.txt
    python benchmarks/hash_results.py > after.txt
    diff before.txt after.txt

The cases: random regular networks (``rand_equation(n, 3, seed, d_min=2, d_max=8)``) of
10 to 300 tensors, seeds 0 and 1, ``greedy`` and ``auto``, with ``reverse`` and
``torch-autograd``; the defaults up to 50 tensors; three strategies in float64 and
``checkpoint`` with ``recompute`` up to 20; every case of ``benchmarks/cases.json`` with
both strategies and with the defaults; a refusal. About two minutes on a 2-core machine.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

CASES = Path(__file__).resolve().parent / "cases.json"


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _strip(item) for key, item in value.items()
                if not (key.endswith("_s") or "second" in key
                        or key in ("environment", "warnings", "timings"))}
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def _digest(report: Any) -> str:
    parts = [repr(report.forward_memory), repr(report.inference_memory), repr(report.warnings)]
    for result in report.strategies:
        parts += [result.name, repr(result.events), repr(result.memory),
                  str(result.forward_flops), str(result.backward_flops),
                  repr(sorted(result.operand_flops.items())), str(result.shared_flops)]
    parts.append(json.dumps(_strip(report.to_dict()), sort_keys=True, default=repr))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _cases() -> list[tuple[str, str, Any, dict[str, Any]]]:
    from opt_einsum.testing import rand_equation

    cases: list[tuple[str, str, Any, dict[str, Any]]] = []
    both = ("reverse", "torch-autograd")
    for n in (10, 20, 50, 100, 200, 300):
        for seed in (0, 1):
            eq, shapes = rand_equation(n, 3, seed=seed, d_min=2, d_max=8)[:2]
            for opt in ("greedy", "auto"):
                name = f"rand{n}-s{seed}-{opt}"
                cases.append((f"{name}-rt", eq, shapes, {"optimize": opt, "strategies": both}))
                if n <= 50:
                    cases.append((f"{name}-default", eq, shapes, {"optimize": opt}))
                if n <= 20:
                    cases.append((f"{name}-three64", eq, shapes, {
                        "optimize": opt, "dtype": "float64",
                        "strategies": ("reverse", "independent", "torch-autograd")}))
                    cases.append((f"{name}-ckrc", eq, shapes, {
                        "optimize": opt, "strategies": ("checkpoint", "recompute")}))
    for case in json.loads(CASES.read_text())["cases"]:
        cases.append((case["name"], case["equation"], case["shapes"],
                      {"optimize": "greedy", "strategies": both}))
        cases.append((case["name"] + "-default", case["equation"], case["shapes"], {}))
    cases.append(("refuse-shape", "ab,bc->ac", [(2, 3), (4, 5)], {}))
    return cases


def main() -> int:
    from einsum_analyze import analyze

    cases = _cases()
    for name, equation, shapes, options in cases:
        try:
            found = _digest(analyze(equation, shapes, **options))
        except Exception as refused:  # a refusal: its message
            found = f"refused: {type(refused).__name__}: {str(refused).splitlines()[0]}"
        print(name, found, flush=True)
    print(f"{len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
