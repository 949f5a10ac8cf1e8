"""The report's platform name is platform.platform()'s, read without a subprocess on Linux."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from einsum_analyze.report.report import platform_name


def test_the_name_is_platform_platform_s() -> None:
    assert platform_name() == platform.platform()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux path")
def test_no_subprocess_is_started_for_it() -> None:
    # A fresh interpreter whose subprocess module refuses to start anything.
    code = ("import subprocess\n"
            "def refuse(*a, **k): raise AssertionError('a subprocess was started')\n"
            "subprocess.Popen = refuse\n"
            "from einsum_analyze.report.report import platform_name\n"
            "print(platform_name())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == platform.platform()
