"""--devices lists that once crashed or took a minute: refused at once, in one line."""

from __future__ import annotations

import pytest

from einsum_analyze.distributed.devices import parse_devices
from einsum_analyze.errors import BackendUnavailableError


@pytest.mark.parametrize(("text", "culprit"), [
    ("cpu*99999", "asks for 99999 processes"),          # was a minute of names.count
    ("cpu*" + "9" * 5000, "is not cpu*N"),              # was int()'s digit limit
    ("cuda:" + "9" * 5000, "is not cpu, cpu:N"),
    ("cpu:\u00b2", "is not cpu, cpu:N"),                # str.isdigit's superscript two
    ("cpu*\u00b2", "is not cpu*N"),
    ("cpu*3,cpu:2", "cpu:2 twice"),
    (",".join(f"cpu:{k}" for k in range(65)), "at most 64"),
])
def test_bad_lists_are_refused_at_once(text: str, culprit: str) -> None:
    with pytest.raises(BackendUnavailableError) as caught:
        parse_devices(text, cuda_count=lambda: 2)
    assert culprit in str(caught.value) and "\n" not in str(caught.value)
    assert len(str(caught.value)) < 200


def test_a_large_cpu_number_only_names_the_process() -> None:
    assert parse_devices("cpu:7,cpu*2", cuda_count=lambda: 0).devices == (
        "cpu:7", "cpu:0", "cpu:1")


@pytest.mark.parametrize("assignment", [
    [[0, 1]],               # one list for two devices
    [[0], [1], []],         # three lists
    [[0, 1], [1, 2, 3]],    # slice 1 twice
    [[0], [1, 2]],          # slice 3 missing
    [[0, 1], [2, 9]],       # no slice 9
])
def test_a_bad_assignment_is_refused_before_any_process(assignment: list[list[int]]) -> None:
    from standin import StandInSlices

    from einsum_analyze.distributed.contract import DistributedJob
    from einsum_analyze.distributed.run import run_distributed
    from einsum_analyze.errors import PlanningError

    runner = StandInSlices("ij,jk->ik", (("i", 2), ("j", 4), ("k", 2)), "j")  # 4 slices
    job = DistributedJob(runner=runner, text="ij,jk->ik", explicit="ij,jk->ik",
                         shapes=((2, 4), (4, 2)), output_shape=(2, 2), dtype="float64",
                         grad=(0, 1), repeats=1, warmup=0, timeout_s=30.0)
    with pytest.raises(PlanningError, match="every slice 0 to 3 in exactly one"):
        run_distributed(job, parse_devices("cpu*2"), assignment=assignment)
