"""The data of every figure, read from a report's JSON form only (no matplotlib).

:func:`figure_data` reads a report dictionary, as :meth:`Report.to_dict` returns it or as
a saved report loads, so plotting during analysis and plotting a saved report draw the
same figures. The drawing code (:mod:`.figures`) reads these records and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FigureData",
    "RunBar",
    "TimelineSeries",
    "TradeoffPoint",
    "TreeData",
    "case_figures",
    "figure_data",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineSeries:
    """One strategy's predicted memory over its events (bytes, inputs included).

    Attributes:
        name: The strategy.
        high_bytes: The high point of each event.
        backward_start: Index of the first backward event.
        peak_event: Index of the peak event (-1: the inputs alone).
        peak_bytes: The training peak.
        measured: ``(device, measured peak bytes)`` of each run of this strategy.
        trace: ``(device, allocated bytes after each allocator event, index of the
            first backward entry)`` of a recorded CUDA run, when one was recorded.
    """

    name: str
    high_bytes: tuple[int, ...]
    backward_start: int
    peak_event: int
    peak_bytes: int
    measured: tuple[tuple[str, int], ...] = ()
    trace: tuple[tuple[str, tuple[int, ...], int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeData:
    """The forward tree, indexed by single-use id, and one strategy's fate of each node."""

    parent: tuple[int, ...]
    bytes: tuple[int, ...]
    terms: tuple[str, ...]
    summed: tuple[str, ...]
    fates: tuple[str, ...]
    strategy: str
    num_operands: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TradeoffPoint:
    """One plan in training FLOPs against training peak.

    Attributes:
        label: What it is (``"reverse"``, ``"limit 64KiB: checkpoint"``, ...).
        kind: ``strategy``, ``torch``, ``limit``, ``pareto`` or ``recommended``.
        flops: Training FLOPs (forward + backward + recompute).
        peak_bytes: Training peak, inputs included.
    """

    label: str
    kind: str
    flops: int
    peak_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBar:
    """One run's time and peak, with the spread of its timing.

    Attributes:
        label: ``STRATEGY`` (``[DEVICE]`` when runs span devices).
        is_baseline: A torch baseline.
        median_s, low_s, high_s: Median forward + backward seconds and the p25/p75 sums.
        peak_bytes_measured: Measured peak, inputs included (None: not measured).
        peak_bytes_predicted: The model's peak on the same basis (None: none).
        steps: ``(label, seconds)`` of each timed step in schedule order, then the events
            between them as ``("other", seconds)`` (``--profile-steps``; empty without).
    """

    label: str
    is_baseline: bool
    median_s: float
    low_s: float
    high_s: float
    peak_bytes_measured: int | None
    peak_bytes_predicted: int | None
    steps: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FigureData:
    """Everything the four figures draw for one report.

    Attributes:
        title: The equation and dtype.
        input_bytes: The operands' bytes.
        timeline: One series per modelled strategy, torch autograd's model included.
        tree: The forward tree (None for a report without steps' tree).
        tradeoff: Plans in training FLOPs and peak.
        runs: Runs that happened.
        budget_bytes: The training budget (``--budget``), drawn as a line; None without.
    """

    title: str
    input_bytes: int
    timeline: tuple[TimelineSeries, ...]
    tree: TreeData | None
    tradeoff: tuple[TradeoffPoint, ...]
    runs: tuple[RunBar, ...]
    budget_bytes: int | None = None


def figure_data(report: Mapping[str, Any]) -> FigureData:
    """The figures' data from one single report's JSON form."""
    forward = report["forward"]
    strategies: Sequence[Mapping[str, Any]] = report.get("strategies", [])
    runs: Sequence[Mapping[str, Any]] = report.get("runs", [])
    traces: Sequence[Mapping[str, Any]] = report.get("measured_timelines", [])
    series = []
    for entry in strategies:
        timeline = entry.get("timeline")
        if timeline is None:
            continue
        name = entry["name"]
        measured = tuple(
            (run["device"], int(run["peak_bytes_measured"])) for run in runs
            if run["strategy"] == name and run.get("peak_bytes_measured") is not None
        )
        trace = tuple((t["device"], tuple(int(b) for b in t["allocated_bytes"]),
                       int(t["backward_start"])) for t in traces if t["strategy"] == name)
        series.append(TimelineSeries(
            name=name, high_bytes=tuple(int(b) for b in timeline["high_bytes"]),
            backward_start=int(timeline["backward_start"]),
            peak_event=int(timeline["peak_event"]), peak_bytes=int(entry["peak_bytes"]),
            measured=measured, trace=trace,
        ))
    recommended = report.get("recommended") or {}
    own = recommended.get("timeline")
    if own is not None and all(tuple(own["high_bytes"]) != s.high_bytes for s in series):
        # The recommended plan's own timeline, where no strategy's is the same.
        label = str(recommended.get("run_label", "recommended"))
        series.append(TimelineSeries(
            name=f"{label}: {recommended['strategy']}",
            high_bytes=tuple(int(b) for b in own["high_bytes"]),
            backward_start=int(own["backward_start"]), peak_event=int(own["peak_event"]),
            peak_bytes=int(recommended["peak_bytes"]),
            measured=tuple((run["device"], int(run["peak_bytes_measured"])) for run in runs
                           if run["strategy"] == label
                           and run.get("peak_bytes_measured") is not None),
        ))
    budget = report.get("budget") or {}
    return FigureData(
        title=f"{report['equation']}  ({report['dtype']})",
        input_bytes=int(forward["input_bytes"]),
        timeline=tuple(series),
        tree=_tree(report, strategies),
        tradeoff=_tradeoff(report, strategies),
        runs=_runs(runs),
        budget_bytes=int(budget["budget_bytes"]) if "budget_bytes" in budget else None,
    )


def case_figures(document: Mapping[str, Any]) -> list[tuple[str, FigureData]]:
    """``(name, data)`` per report of a document.

    One for a single report, one per analysed case of a batch (a case that failed has
    no figures).
    """
    if "cases" not in document:
        return [("", figure_data(document))]
    return [(case["name"], figure_data(case["report"])) for case in document["cases"]
            if "report" in case]


def fate_strategy(strategies: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The strategy whose fates colour the tree.

    Checkpoint (it shows all three fates), else reverse, else the first with fates.
    """
    with_fates = [s for s in strategies if "fates" in s]
    for name in ("checkpoint", "reverse"):
        for entry in with_fates:
            if entry["name"] == name:
                return entry
    return with_fates[0] if with_fates else None


def _tree(report: Mapping[str, Any],
          strategies: Sequence[Mapping[str, Any]]) -> TreeData | None:
    tree = report["forward"].get("tree")
    if tree is None:
        return None
    parent = tuple(int(p) for p in tree["parent"])
    num_ops = len(report["shapes"])
    chosen = fate_strategy(strategies)
    if chosen is not None:
        fates = tuple(chosen["fates"])
        name = chosen["name"]
    else:  # forward only: every intermediate is freed when dead
        fates = tuple("input" if i < num_ops else "output" if p < 0 else "freed"
                      for i, p in enumerate(parent))
        name = "inference"
    return TreeData(parent=parent, bytes=tuple(int(b) for b in tree["bytes"]),
                    terms=tuple(tree["terms"]),
                    summed=tuple(tree["summed"]), fates=fates, strategy=name,
                    num_operands=num_ops)


def _tradeoff(report: Mapping[str, Any],
              strategies: Sequence[Mapping[str, Any]]) -> tuple[TradeoffPoint, ...]:
    points = [
        TradeoffPoint(label=s["name"], kind="torch" if s["name"] == "torch-autograd"
                      else "strategy", flops=int(s["total_flops"]),
                      peak_bytes=int(s["peak_bytes"]))
        for s in strategies
    ]
    for row in report.get("memory_limits", []):
        for s in row["strategies"]:
            points.append(TradeoffPoint(
                label=f"limit {row['limit']}: {s['name']}", kind="limit",
                flops=int(row["forward_flops"]) + int(s["backward_flops"]),
                peak_bytes=int(s["peak_bytes"])))
    for plan in report.get("pareto", []):
        points.append(TradeoffPoint(
            label=f"{plan['strategy']} on {plan['source']}", kind="pareto",
            flops=int(plan["training_flops"]), peak_bytes=int(plan["peak_bytes"])))
    rec = report.get("recommended")
    if rec is not None:
        points.append(TradeoffPoint(
            label=f"recommended: {rec['strategy']} on {rec['source']}", kind="recommended",
            flops=int(rec["training_flops"]), peak_bytes=int(rec["peak_bytes"])))
    return tuple(points)


def _runs(runs: Sequence[Mapping[str, Any]]) -> tuple[RunBar, ...]:
    done = [r for r in runs if r.get("skipped") is None and r.get("forward_s") is not None]
    many_devices = len({r["device"] for r in done}) > 1
    bars = []
    for run in done:
        forward = run["forward_s"]
        backward = run.get("backward_s") or {}

        def part(stats: Mapping[str, Any], key: str) -> float:
            return float(stats.get(key, stats.get("median", 0.0)))

        label = run["strategy"] + (f" [{run['device']}]" if many_devices else "")
        bars.append(RunBar(
            label=label, is_baseline=bool(run.get("baseline", False)),
            median_s=part(forward, "median") + part(backward, "median"),
            low_s=part(forward, "p25") + part(backward, "p25"),
            high_s=part(forward, "p75") + part(backward, "p75"),
            peak_bytes_measured=run.get("peak_bytes_measured"),
            peak_bytes_predicted=run.get("peak_bytes_predicted"),
            steps=_step_times(run),
        ))
    return tuple(bars)


def _step_times(run: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """A run's per-step times (``--profile-steps``), then the time between the steps."""
    steps: Sequence[Mapping[str, Any]] = run.get("steps") or []
    if not steps:
        return ()
    found = [(f"#{step['event']} {step['tensor']}", float(step["time_s"])) for step in steps]
    return (*found, ("other", float(run.get("steps_other_s") or 0.0)))
