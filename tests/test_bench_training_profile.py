"""bench_training.py calibrates the device before its first search.

``execute`` calibrates the device it runs on, and the searches predict on that
calibration once there is one (:func:`einsum_analyze.backends.calibration.device_profile`).
The first case's search without a budget came before any run, so it predicted on the
nominal profile where its search at the budget predicted on the calibrated one: on the
H200, tn18-b512's two searches chose different plans (docs/budgets.md). The bench now
calibrates first; here its measuring and its searches are replaced by recorders.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from einsum_analyze.backends import calibration

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_training.py"


def test_the_device_is_calibrated_before_the_first_search(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    spec = importlib.util.spec_from_file_location("benchmark_bench_training", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen: list[str] = []

    def calibrate(device: str, dtype: str) -> None:
        seen.append(f"calibrate {device} {dtype}")

    def search(case: dict[str, Any], *args: Any) -> dict[str, Any]:
        seen.append(f"search {case['name']}")
        return {"strategy": "reverse", "source": "auto", "fits": True,
                "predicted_peak_bytes": 1}

    monkeypatch.setattr(calibration, "calibrate", calibrate)
    monkeypatch.setattr(module, "run_recommended", search)
    monkeypatch.setattr(module, "torch_einsum",
                        lambda *args, **kwargs: {"time_s": 1.0, "peak_bytes": None})
    monkeypatch.setattr(sys, "argv", ["bench_training.py", "--device", "cpu", "--cases",
                                      "trace,implicit", "--no-compile"])
    assert module.main() == 0
    capsys.readouterr()
    assert seen == ["calibrate cpu float32", "search trace", "search implicit"]
