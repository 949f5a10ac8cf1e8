"""model/memo.py: the collector is paused while an analysis runs, and given back as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from einsum_analyze import analyze
from einsum_analyze.model.memo import paused_collection


@pytest.fixture
def collector() -> Iterator[None]:
    """Whatever a test does to the collector, it runs again afterwards."""
    was = gc.isenabled()
    try:
        yield
    finally:
        if was:
            gc.enable()


def test_paused_inside_and_running_after(collector: None) -> None:
    gc.enable()
    with paused_collection():
        assert not gc.isenabled()
        with paused_collection():  # nested: still paused, and the outer block decides
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_paused_collector_stays_paused(collector: None) -> None:
    gc.disable()
    with paused_collection():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_runs_again_after_an_error(collector: None) -> None:
    gc.enable()
    with pytest.raises(KeyError), paused_collection():
        raise KeyError("x")
    assert gc.isenabled()


def test_analyze_pauses_it_and_gives_it_back(
    collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import einsum_analyze.analysis as analysis

    seen: list[bool] = []
    inner = analysis._analyze_one

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return inner(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(analysis, "_analyze_one", spy)
    gc.enable()
    report = analyze("ab,bc->ac", [(2, 3), (3, 4)], memory_limit="none,100")
    assert seen == [False, False]  # both limits of the sweep ran paused
    assert gc.isenabled()
    assert report.plan.flops == 48
