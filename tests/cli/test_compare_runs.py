"""`compare` on real runs: a change of load between two runs is no regression, a real
slowdown of one strategy is one.

Both reports are measured here, on this machine's cpu, with the command users type, on
one torch thread as docs/ci.md advises for shared runners (``OMP_NUM_THREADS=1``): with
more threads than free cores, a loaded machine stalls torch's thread pool for whole
scheduler slices, and no statistic over ten blocks sees through that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from einsum_analyze import execution
from einsum_analyze.cli import cli

pytestmark = pytest.mark.slow

ARGS = ["bhqd,bhkd,bhkv->bhqv", "--shapes", "2x8x256x64,2x8x256x64,2x8x256x64",
        "--strategy", "reverse,independent,torch-autograd", "--device", "cpu"]

# Blocks per run. The margin compare allows a ratio is built from the medians' notches,
# 1.57 * IQR / sqrt(blocks) (report/compare_times.py). Under load the baseline's blocks
# can split into a fast and a preempted group, an IQR of half the median or more, and at
# 20 blocks the notches of a 3x slower run then swallow the change. At 80 the notches are
# half as wide, and a 3x change stands clear of them at twice that spread.
REPEATS = 20
SLOWDOWN_REPEATS = 80


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _measure(path: Path, repeats: int = REPEATS) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*ARGS, "--repeats", str(repeats), "--json", str(path)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    report: dict[str, Any] = json.loads(path.read_text())
    assert any(run["strategy"] == "torch-autograd" and run["baseline"]
               for run in report["runs"])
    return report


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report measured on the machine as it is, the "before" of the load comparison."""
    path = tmp_path_factory.mktemp("compare_runs") / "quiet.json"
    _measure(path)
    return path


@contextmanager
def _busy_cpus() -> Iterator[None]:
    """Another process per core, each spinning, for as long as the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _compare(before: Path, after: Path) -> Any:
    """compare with the shared runner's tolerance of docs/ci.md (a ratio may grow 50 %)."""
    return CliRunner().invoke(cli, ["compare", str(before), str(after), "--tolerance", "0.5"],
                              catch_exceptions=False)


def test_identical_runs_the_second_under_load_do_not_regress(quiet: Path,
                                                            tmp_path: Path) -> None:
    loaded = tmp_path / "loaded.json"
    with _busy_cpus():
        _measure(loaded)
    result = _compare(quiet, loaded)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert "No regression" in result.stdout


class _ThreeTimes:
    """An executor that does its forward and its backward work three times over."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def forward(self, program: Any) -> Any:
        self._inner.forward(program)
        self._inner.forward(program)
        return self._inner.forward(program)

    def backward(self, program: Any, state: Any) -> Any:
        for _ in range(2):  # two more backward passes, each on a state of its own
            spare = self._inner.prepare_backward(program, self._inner.forward(program))
            self._inner.backward(program, spare)
        return self._inner.backward(program, state)


def test_a_real_3x_slowdown_of_one_strategy_is_caught(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own "before", measured just ahead of the "after" with as many blocks.
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    _measure(before, SLOWDOWN_REPEATS)
    original = execution.prepare_strategy

    def slower(executor: Any, context: Any, **kwargs: Any) -> Any:
        if kwargs["strategy"] == "independent":
            executor = _ThreeTimes(executor)
        return original(executor, context, **kwargs)

    monkeypatch.setattr(execution, "prepare_strategy", slower)
    slow = _measure(after, SLOWDOWN_REPEATS)
    independent = next(run for run in slow["runs"] if run["strategy"] == "independent")
    assert independent["max_grad_error"] < 1e-5  # still the right gradients
    result = _compare(before, after)
    assert result.exit_code == 1
    regressed = [line for line in result.stderr.splitlines() if line.startswith("Regression:")]
    assert any(line.startswith("Regression: run independent, torch, cpu forward_s / torch: ")
               for line in regressed), result.stderr
    assert any(line.startswith("Regression: run independent, torch, cpu backward_s / torch: ")
               for line in regressed), result.stderr
    # Other runs' lines are not asserted on: a burst of load that starts between two
    # runs of one report moves their ratios too; test_identical_runs_... above checks
    # that steady load does not.
