"""benchmarks/gpu_suite.sh fits in 9 minutes by construction, and the benchmarks' shared
``--max-seconds`` leaves out the cases that would end past it, and says which."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "gpu_suite.sh"


def common():
    spec = importlib.util.spec_from_file_location("_common", ROOT / "benchmarks" / "_common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def timed(monkeypatch):
    """benchmarks/_common.py with its clock a :class:`Clock` the test moves on."""
    module = common()
    clock = Clock()
    monkeypatch.setattr(module.time, "perf_counter", clock)
    return module, clock


def test_a_case_predicted_to_end_past_the_limit_is_left_out(timed):
    module, clock = timed
    limit = module.TimeLimit(7.0)
    ran = []
    for case in limit.cases([{"name": n} for n in "abcd"]):
        ran.append(case["name"])
        clock.now += 3.0  # 3 s each: a at 0, b at 3 (3 + 1 <= 7), c at 6 (6 + 3 > 7)
    assert ran == ["a", "b"]
    assert limit.left_out == ["c", "d"]
    assert limit.line() == "left out at --max-seconds 7: 2 cases (c, d)"


def test_the_first_case_predicts_a_third_of_its_time(timed):
    # The first case carries the process's one-time work (the device's context, its
    # calibration): 9 s of it predicts 3 s for the next case, not 9.
    module, clock = timed
    limit = module.TimeLimit(14.0)
    ran = []
    for case, took in zip(limit.cases([{"name": n} for n in "abcd"]), (9.0, 2.0, 2.0, 2.0),
                          strict=False):
        ran.append(case["name"])
        clock.now += took
    # a at 0; b at 9 (9 + 3 <= 14); c at 11 (11 + 3 <= 14); d at 13 (13 + 3 > 14)
    assert ran == ["a", "b", "c"] and limit.left_out == ["d"]


def test_without_a_limit_every_case_runs(timed):
    module, clock = timed
    limit = module.TimeLimit(None)
    for _ in limit.cases([{"name": n} for n in "abc"]):
        clock.now += 1e6
    assert limit.left_out == [] and limit.line() is None


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "soon"])
def test_max_seconds_must_be_seconds_above_zero(text, capsys):
    parser = argparse.ArgumentParser(prog="bench")
    common().add_time_limit(parser)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--max-seconds", text])
    assert stop.value.code == 2
    assert f"'{text}' is not seconds above 0" in capsys.readouterr().err


def steps() -> list[tuple[str, int, float | None]]:
    """(name, limit, --max-seconds or None) of every ``step`` line of the suite."""
    text = SUITE.read_text(encoding="utf-8").replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        if match := re.match(r"step (\w+) +(\d+) (.*)", line):
            seconds = re.search(r"--max-seconds (\d+)", match[3])
            found.append((match[1], int(match[2]), float(seconds[1]) if seconds else None))
    return found


def test_the_suite_limits_add_up_to_under_nine_minutes():
    found = steps()
    assert len(found) >= 10
    # Each step is stopped at its limit (timeout's 10 s grace is for the kill).
    assert sum(limit for _, limit, _ in found) <= 9 * 60 - 20


NOT_IN_SUITE = {
    "bench_distributed": "needs two GPUs, and the suite runs on one",
    "bench_budget_space": "a diagnosis of one budget (docs/budgets.md), run by its own GPU "
                          "request; its sweep of slicings takes minutes on tn18-b512",
}
"""Benchmarks that take a device but are not steps of the suite, with the reason."""


def test_every_gpu_benchmark_is_a_step_and_stops_before_its_limit():
    found = steps()
    commands = SUITE.read_text(encoding="utf-8")
    # A benchmark that takes a device (its own --device, or the shared case options) runs
    # on the GPU, but for those NOT_IN_SUITE names.
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        text = script.read_text(encoding="utf-8")
        if ('add_argument("--device"' in text or "add_case_options(" in text) \
                and script.stem not in NOT_IN_SUITE:
            assert f"benchmarks/{script.name}" in commands, script.name
    for name, limit, seconds in found:
        assert seconds is None or seconds < limit - 5, name


def test_the_suite_is_valid_bash_and_refuses_a_missing_outdir():
    assert subprocess.run(["bash", "-n", str(SUITE)], check=False).returncode == 0
    done = subprocess.run(["bash", str(SUITE)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "usage: bash benchmarks/gpu_suite.sh OUTDIR" in done.stderr


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          check=False, cwd=ROOT, env=env, timeout=300)


def test_a_limit_that_leaves_out_every_case_still_prints_the_table_and_says_so():
    done = _bench("benchmarks/bench_training.py", "--device", "cpu", "--max-seconds", "1e-9")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "left out at --max-seconds 1e-09" in done.stdout


@pytest.mark.parametrize("text", ["nan", "-1", "inf"])
def test_bench_dropins_max_seconds_must_be_seconds_above_zero(text):
    done = _bench("benchmarks/bench_dropin.py", "--max-seconds", text)
    assert done.returncode == 2 and done.stdout == ""
    assert f"'{text}' is not seconds above 0" in done.stderr


def test_the_named_steps_are_the_suite_s_steps_and_an_unknown_one_is_refused():
    text = SUITE.read_text()
    (listed,) = re.findall(r'^all_steps=" ([a-z ]+) "$', text, flags=re.M)
    assert listed.split() == re.findall(r"^step (\w+) ", text, flags=re.M)
    done = subprocess.run(["bash", str(SUITE), "/tmp/gpu-suite-unused", "slicing", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip().splitlines() == [
        f"gpu_suite: unknown step 'nope' (steps: {listed})"]
