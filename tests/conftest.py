"""Shared pytest configuration: hypothesis profiles, --update-golden, --run-slow, GPU auto-skip.

The default run (the README's ``python -m pytest -q``) takes a few minutes on a 2-core
CPU: tests marked ``slow`` (whole CPU runs of the larger benchmark cases, brute-force
searches, subprocess-heavy checks) are skipped unless ``--run-slow`` is given, and the
property tests draw a small budget of examples. Before a release::

    python -m pytest -q --run-slow --hypothesis-profile=thorough
"""

from __future__ import annotations

import gc
import os

import pytest
from budgets import THOROUGH
from hypothesis import HealthCheck, settings

settings.register_profile(
    "dev",
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=30,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",  # pytest --hypothesis-profile=thorough, before a release
    max_examples=THOROUGH,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.json from the current code instead of comparing",
    )
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (skipped by default to keep the suite short)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.update_golden = config.getoption("--update-golden")  # type: ignore[attr-defined]
    # When a property fails, hypothesis imports libcst to write a patch file, and libcst
    # imports a deprecated mypy_extensions name: with filterwarnings=error that warning
    # would turn the failure report into an INTERNALERROR.
    config.addinivalue_line(
        "filterwarnings", "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files should be rewritten rather than compared."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap() -> None:
    """Freeze the heap at each test module's start, once the module before is torn down.

    The executor makes a full collection before it times (``measure_interleaved``). In
    this process that would walk every object of torch, transformers, hypothesis and each
    module imported lazily on the way, at every measured run; frozen, those objects are
    left alone and a collection walks only what the module's own tests made.
    """
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-slow"):
        slow = pytest.mark.skip(reason="slow: run with --run-slow")
        for item in items:
            if item.get_closest_marker("slow") is not None:
                item.add_marker(slow)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    import torch  # lazily: most runs never need it here

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in gpu_items:
        item.add_marker(skip)
