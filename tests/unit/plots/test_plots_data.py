"""Figure data, tree layout and the JSON the pictures read (no matplotlib needed)."""

from __future__ import annotations

import json

from report_schema import validate_report

from einsum_analyze import analyze
from einsum_analyze.plots import figure_data
from einsum_analyze.plots.html import embed_json, inline_svg
from einsum_analyze.plots.layout import labelled_nodes, layout_tree
from einsum_analyze.runs.timeline import allocated_from_trace

ALL = ("reverse", "independent", "torch-autograd", "checkpoint")


def test_tree_and_timeline_in_the_json() -> None:
    report = analyze("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)], strategies=ALL)
    data = json.loads(json.dumps(report.to_dict()))
    validate_report(data)
    tree = data["forward"]["tree"]
    # ab,bc -> ca (id 3, b summed), then ca,cd -> ad (id 4, c summed); float32.
    assert tree == {"parent": [3, 3, 4, 4, -1], "bytes": [24, 48, 80, 32, 40],
                    "terms": ["ab", "bc", "cd", "ca", "ad"], "summed": ["", "", "", "b", "c"],
                    "flops": [0, 0, 0, 48, 80]}
    for entry, strategy in zip(data["strategies"], report.strategies, strict=True):
        timeline = entry["timeline"]
        assert len(timeline["live_bytes"]) == len(strategy.events)
        assert max(timeline["high_bytes"]) == entry["peak_bytes"]
        assert timeline["high_bytes"][timeline["peak_event"]] == entry["peak_bytes"]
        start = timeline["backward_start"]
        assert all(e.phase == "forward" for e in strategy.events[:start])
        assert all(e.phase == "backward" for e in strategy.events[start:])
    fates = {entry["name"]: entry["fates"] for entry in data["strategies"]}
    assert fates["reverse"] == ["input", "input", "input", "retained", "output"]
    assert fates["independent"] == ["input", "input", "input", "freed", "output"]


def test_checkpoint_fates_say_what_is_recomputed() -> None:
    report = analyze("ab,bc,cd,de->ae", [(4, 5), (5, 6), (6, 7), (7, 3)],
                     strategies=("checkpoint",), strategy_options={"checkpoint": {"keep": []}})
    entry = report.to_dict()["strategies"][0]
    recomputed = {item["id"] for item in entry["checkpoint"]["recomputed"]}
    assert recomputed
    assert {i for i, fate in enumerate(entry["fates"]) if fate == "recomputed"} == recomputed


def test_figure_data_of_a_saved_report_equals_the_live_one() -> None:
    report = analyze("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)], strategies=ALL,
                     memory_limit="none,8")
    live = report.to_dict()
    saved = json.loads(json.dumps(live))
    assert figure_data(live) == figure_data(saved)
    data = figure_data(saved)
    assert [s.name for s in data.timeline] == list(ALL)
    assert data.tree is not None and data.tree.strategy == "checkpoint"
    kinds = {p.kind for p in data.tradeoff}
    assert {"strategy", "torch", "limit"} <= kinds


def test_layout_of_a_deep_chain_does_not_recurse() -> None:
    n = 3000  # a caterpillar: operand k joins the running result
    parent = [-1] * (2 * n - 1)
    parent[0] = parent[1] = n
    for k in range(2, n):
        parent[k] = n + k - 1
        parent[n + k - 2] = n + k - 1
    layout = layout_tree(parent)
    assert layout.y[2 * n - 2] == n - 1
    assert layout.roots == (2 * n - 2,)
    assert sorted(layout.x[:n]) == [float(i) for i in range(n)]


def test_layout_puts_parents_over_their_children() -> None:
    layout = layout_tree([4, 4, 5, 5, 6, 6, -1])
    assert layout.x == (0.0, 1.0, 2.0, 3.0, 0.5, 2.5, 1.5)
    assert layout.y == (0, 0, 0, 0, 1, 1, 2)


def test_large_trees_label_only_the_largest() -> None:
    num_ops = 100
    sizes = list(range(1, 2 * num_ops))
    parent = [2 * num_ops - 2] * (2 * num_ops - 2) + [-1]
    shown = labelled_nodes(sizes, num_ops, parent)
    assert len(shown) == 12 and 2 * num_ops - 2 in shown
    assert min(shown) == 2 * num_ops - 13  # the largest intermediates
    assert labelled_nodes(sizes[:5], 3, [3, 3, 4, 4, -1]) == frozenset(range(5))


def test_allocator_trace_to_timeline() -> None:
    trace = [{"action": "alloc", "size": 512}, {"action": "segment_alloc", "size": 2 << 20},
             {"action": "alloc", "size": 1024}, {"action": "free_requested", "size": 512},
             {"action": "free_completed", "size": 512}]
    assert allocated_from_trace(trace, 100) == [612, 1636, 1124]
    long = [{"action": "alloc", "size": 1}] * 10 + [{"action": "free_completed", "size": 10}]
    assert allocated_from_trace(long, 0, limit=4) == [3, 6, 9, 10]


def test_embedded_json_has_no_url_and_reads_back() -> None:
    data = {"warning": "see https://example.invalid/</script>", "n": [1, 2]}
    text = embed_json(data)
    assert "https://" not in text and "</script" not in text
    assert json.loads(text) == data


def test_inline_svg_drops_namespace_urls() -> None:
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
           '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg xmlns:xlink='
           '"http://www.w3.org/1999/xlink" width="1" xmlns="http://www.w3.org/2000/svg">'
           '<metadata><rdf:RDF xmlns:dc="http://purl.org/dc/elements/1.1/"/></metadata>'
           "<text>hi</text></svg>")
    out = inline_svg(svg)
    assert out == '<svg width="1"><text>hi</text></svg>'


def test_profiled_steps_reach_the_runs_figure() -> None:
    from einsum_analyze.plots.data import figure_data as read

    report = {"equation": "ab,bc->ac", "dtype": "float32",
              "forward": {"input_bytes": 8, "steps": []}, "runs": [
                  {"strategy": "reverse", "device": "cpu", "forward_s": {"median": 2.0},
                   "backward_s": {"median": 1.0},
                   "steps": [{"event": 0, "tensor": "x2", "time_s": 1.5},
                             {"event": 3, "tensor": "d0", "time_s": 1.0}],
                   "steps_other_s": 0.5},
                  {"strategy": "torch-autograd", "baseline": True, "device": "cpu",
                   "forward_s": {"median": 1.0}, "backward_s": None}]}
    bars = read(report).runs
    assert bars[0].steps == (("#0 x2", 1.5), ("#3 d0", 1.0), ("other", 0.5))
    assert bars[1].steps == ()


def test_runs_figure_names_the_costliest_step() -> None:
    import pytest

    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from einsum_analyze.plots.data import RunBar
    from einsum_analyze.plots.figures import draw_runs

    bar = RunBar(label="reverse", is_baseline=False, median_s=3.0, low_s=2.9, high_s=3.1,
                 peak_bytes_measured=None, peak_bytes_predicted=None,
                 steps=(("#0 x2", 0.5), ("#3 d0", 2.0), ("other", 0.5)))
    left, right = Figure().subplots(1, 2)
    draw_runs((left, right), [bar])
    texts = [t.get_text() for t in left.texts]
    assert "#3 d0 67%" in texts


def test_the_budget_and_the_recommended_plan_are_drawn() -> None:
    # bc,bd,cm,mdn->bn at b=512 under 50 KiB: the plan recommended is sliced, which none
    # of the report's strategies is, so its timeline is its own.
    report = analyze("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)],
                     budget="50KiB", max_search_s=None)  # no deadline: the same plan under load
    data = json.loads(json.dumps(report.to_dict()))
    validate_report(data)
    figures = figure_data(data)
    assert figures.budget_bytes == 50 * 1024
    assert data["recommended"]["strategy"] not in [s["name"] for s in data["strategies"]]
    recommended = data["recommended"]
    own = [s for s in figures.timeline if s.name.startswith(recommended["run_label"])]
    assert len(own) == 1 and own[0].peak_bytes == recommended["peak_bytes"]
    assert max(own[0].high_bytes) == recommended["peak_bytes"] <= figures.budget_bytes
    assert figure_data(analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict()).budget_bytes is None
