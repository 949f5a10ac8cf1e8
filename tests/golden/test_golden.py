"""Golden reports: the deterministic sections of a few analyses, byte for byte.

Regenerate with ``pytest tests/golden --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from einsum_analyze import analyze

HERE = Path(__file__).parent
TN18 = "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz"
TN18_SHAPES = [[512, 2]] * 9 + [[2, 7]] + [[7, 2, 7]] * 3 + [[7, 2, 10, 7]] + [[7, 2, 7]] * 3 + [
    [7, 2]
]

CASES: dict[str, dict[str, Any]] = {
    "tn18_b512_dp": {"equation": TN18, "shapes": TN18_SHAPES, "optimize": "dp",
                     "dtype": "float64"},
    "tn18_b512_params": {"equation": TN18, "shapes": TN18_SHAPES, "optimize": "greedy",
                         "grad": "9-17"},
    "diag_private": {"equation": "ijj,k->ik", "shapes": [[64, 32, 32], [16]]},
    "ellipsis_broadcast": {"equation": "...ij,...jk->...ik",
                           "shapes": [[8, 1, 32, 64], [1, 4, 64, 16]]},
    "trace": {"equation": "ii->", "shapes": [[128, 128]]},
    # grad_operands is always present: [] without strategies; without the independent
    # strategy there is no gradients section but the operands are still listed.
    "mm_forward_only": {"equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]],
                        "strategies": ()},
    "mm_reverse_grad1": {"equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]],
                         "strategies": ("reverse",), "grad": "1"},
}

VOLATILE = {"timing", "environment", "tool", "planning_s"}


def _mask(data: Any) -> Any:
    if isinstance(data, dict):
        return {key: _mask(value) for key, value in data.items() if key not in VOLATILE}
    if isinstance(data, list):
        return [_mask(item) for item in data]
    return data


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_report(name: str, update_golden: bool) -> None:
    case = dict(CASES[name])
    report = analyze(case.pop("equation"), case.pop("shapes"), **case)
    got = _mask(report.to_dict())
    path = HERE / f"{name}.json"
    if update_golden:
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip("golden file rewritten")
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got == want
