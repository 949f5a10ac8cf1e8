"""Ranks die with their parent, and a rank's error text is printed as text, not markup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from einsum_analyze.distributed.launch import launch

    def sleeper(rank, folder):
        with open(os.path.join(folder, f"rank{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)

    if __name__ == "__main__":
        launch(sleeper, [(sys.argv[1],)] * 2, timeout_s=300)
""")


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    state = next(line.split()[1] for line in status.splitlines() if line.startswith("State:"))
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_ranks_die_with_a_parent_that_is_killed(tmp_path: Path, how: signal.Signals) -> None:
    script = tmp_path / "parent.py"
    script.write_text(_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid") if p.read_text()]
        assert len(pids) == 2, "the ranks did not start"
        parent.send_signal(how)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in pids if _alive(pid)], "ranks outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_gloo_error_with_brackets_is_printed_not_parsed() -> None:
    from rich.console import Console

    from einsum_analyze.distributed.run import DeviceFigures, DistributedResult
    from einsum_analyze.render.distributed import render_distributed

    error = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
             "pair.cc:537] Read error [127.0.0.1]:8118: Connection reset by peer")
    result = DistributedResult(
        devices=("cpu:0", "cpu:1"), backend="gloo", slice_count=1,
        per_device=(DeviceFigures(rank=0, device="cpu:0", slices=(0,), error=error),
                    DeviceFigures(rank=1, device="cpu:1", slices=(), error="killed by SIGKILL")),
        step_s=None, single_device=None, reduce_bytes=None, max_grad_error=None,
        output_error=None, failed=True, timings={})
    out, err = Console(record=True, width=400), Console(record=True, width=400)
    render_distributed(result, out, err)
    text = err.export_text()
    assert "pair.cc:537] Read error [127.0.0.1]:8118" in text
    title = out.export_text().strip().splitlines()[0].strip()
    assert title == "Sliced step on 2 devices (gloo): 1 slice"


def test_a_slow_step_reads_its_speedup_not_zero() -> None:
    from rich.console import Console

    from einsum_analyze.distributed.run import DeviceFigures, DistributedResult
    from einsum_analyze.render.distributed import render_distributed

    result = DistributedResult(
        devices=("cpu:0",), backend="gloo", slice_count=4,
        per_device=(DeviceFigures(rank=0, device="cpu:0", slices=(0, 1, 2, 3),
                                  compute_s=0.05),),
        step_s=0.05, single_device={"device": "cpu:0", "slices": 4, "seconds": 0.0002,
                                    "peak_bytes_measured": 8, "peak_bytes_predicted": 8},
        reduce_bytes=8, max_grad_error=1e-7, output_error=1e-7, failed=False, timings={})
    out = Console(record=True, width=200)
    render_distributed(result, out, Console(record=True))
    text = out.export_text()
    assert "Sliced step on 1 device (gloo): 4 slices" in text
    assert ("step 50 ms on 1 device: speedup 0.004x over one device alone (slower), "
            "efficiency 0.004,") in text



def test_a_failed_run_is_one_line_naming_the_cause_first() -> None:
    from rich.console import Console

    from einsum_analyze.distributed.run import DeviceFigures, DistributedResult
    from einsum_analyze.render.distributed import render_distributed

    result = DistributedResult(
        devices=("cpu:0", "cpu:1"), backend="gloo", slice_count=2,
        per_device=(DeviceFigures(rank=0, device="cpu:0", slices=(0,),
                                  error="stopped: rank 1 failed"),
                    DeviceFigures(rank=1, device="cpu:1", slices=(1,),
                                  error="stopped responding: no heartbeat for 10 s")),
        failed=True)
    err = Console(record=True, width=60)
    render_distributed(result, Console(record=True, width=60), err)
    lines = err.export_text().strip().splitlines()
    assert lines == ["error: distributed run failed: rank 1 (cpu:1): stopped responding: "
                     "no heartbeat for 10 s; then rank 0 (cpu:0): stopped: rank 1 failed"]


def test_the_way_of_communicating_is_one_line_beside_the_all_reduce_it_replaces() -> None:
    from rich.console import Console

    from einsum_analyze.distributed.run import DeviceFigures, DistributedResult
    from einsum_analyze.render.distributed import render_distributed

    result = DistributedResult(
        devices=("cpu:0", "cpu:1"), backend="gloo", slice_count=2,
        per_device=(DeviceFigures(rank=0, device="cpu:0", slices=(0,)),
                    DeviceFigures(rank=1, device="cpu:1", slices=(1,))),
        reduce_bytes=3632, communication="gather", moved_bytes=672, calls=3)
    out = Console(record=True, width=400)
    render_distributed(result, out, Console(record=True))
    assert ("gather (parts of sliced buffers from their owners, the rest summed): 3 "
            "collective calls per step, at most 672 B received per device (an all-reduce "
            "of every buffer: 3.55 KiB)") in out.export_text()
