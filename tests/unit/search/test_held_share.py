"""The sliced fallback's share of the search time is held back only while no plan fits.

With a budget, the candidate paths and their scores stop at ``FIRST_SHARE`` of the
deadline so that slicing has the rest. Where the report's own path has no plan within
the budget but a later path has (``tn18-b512`` at the midpoint budget of
``bench_training.py``: ``auto``'s 12.6 MiB against 6.4 MiB, ``dp``'s 0.96 MiB), the
fallback will not run once that plan is scored, and the paths go on to the deadline, as
they do without a budget (docs/budgets.md).
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

from einsum_analyze import analyze
from einsum_analyze.model.deadline import HeldShare, search_deadline

recommend_module = importlib.import_module("einsum_analyze.search.recommend")

CASES = json.loads((Path(__file__).parents[3] / "benchmarks" / "cases.json").read_text())
TN18 = next(case for case in CASES["cases"] if case["name"] == "tn18-b512")
MIDPOINT = 6_695_971
"""tn18-b512's B = F + 0.5 (P - F) in bytes (bench_training.py's, from the model)."""
STEP, DEADLINE = 5.0, 100.0


def test_a_held_share_ends_the_part_early_until_it_lapses():
    now = time.perf_counter()
    with search_deadline(60.0):
        held = HeldShare(now - 1.0)
        assert held.over() and held.remaining_s() == 0.0 and held.held_s() == 0.0
        assert held.lapse() and not held.lapse()
        assert not held.over()
        left = held.remaining_s()
        assert left is not None and 50.0 < left <= 60.0
        assert held.held_s() is None
    assert HeldShare(None).remaining_s() is None and not HeldShare(None).over()


def test_the_paths_go_past_the_share_once_a_plan_fits(monkeypatch):
    # A fake clock: every plan scored takes 5 s of a 100 s deadline (the real seconds
    # of planning the candidates are few beside them). The share held for the fallback
    # ends at 60 s; reverse mode on the second path fits, so plans are still started
    # past 60 s, and no sliced plan is scored (the fallback does not run).
    offset = [0.0]
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + offset[0])
    seen: list[tuple[float, str, bool]] = []
    score = recommend_module.score_path

    def timed(*args, **kwargs):
        began = offset[0]  # the fake seconds so far (the real ones are few beside them)
        result = score(*args, **kwargs)
        offset[0] += STEP
        seen.append((began, result.strategy, result.fits(MIDPOINT)))
        return result

    monkeypatch.setattr(recommend_module, "score_path", timed)
    report = analyze(TN18["equation"], TN18["shapes"], objective="time", budget=MIDPOINT,
                     strategies=["reverse", "checkpoint", "sliced"], max_search_s=DEADLINE)
    share = recommend_module.FIRST_SHARE * DEADLINE
    assert report.recommended is not None and report.recommended.fits
    began = [t for t, name, _ in seen if name != "torch-autograd"]
    assert max(began) > share + STEP  # plans were started past the held share's end
    assert max(began) < DEADLINE  # and none past the deadline
    assert not any(name == "sliced" for _, name, _ in seen)
