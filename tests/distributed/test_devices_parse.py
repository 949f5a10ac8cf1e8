"""--devices lists that once crashed or took a minute: refused at once, in one line."""

from __future__ import annotations

import time

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
    start = time.perf_counter()
    with pytest.raises(BackendUnavailableError) as caught:
        parse_devices(text, cuda_count=lambda: 2)
    assert culprit in str(caught.value) and "\n" not in str(caught.value)
    assert len(str(caught.value)) < 200
    assert time.perf_counter() - start < 1.0


def test_a_large_cpu_number_only_names_the_process() -> None:
    assert parse_devices("cpu:7,cpu*2", cuda_count=lambda: 0).devices == (
        "cpu:7", "cpu:0", "cpu:1")
