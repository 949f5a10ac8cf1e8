"""The four figures, drawn with matplotlib from :class:`.data.FigureData` only.

matplotlib is imported here and nowhere in the analysis: this module is loaded only when
a plot is asked for. Figures are built as :class:`matplotlib.figure.Figure` objects, not
through pyplot, so no GUI backend and no global figure state are involved.

- :func:`draw_timeline`: predicted live bytes over the events of forward then backward,
  every strategy (torch autograd's model included) on one axis. Each strategy's forward
  is stretched over [0, 1] and its backward over [1, 2], so the phase boundary is one
  line for all; the peak of each is marked and printed in the legend; measured peaks of
  runs are crosses at the predicted peak's position; a recorded CUDA timeline is a
  dotted line over its strategy's.
- :func:`draw_tree`: the forward tree (:mod:`.layout`), nodes sized by bytes and coloured
  by fate, each intermediate labelled with its term, the labels it sums and its size.
- :func:`draw_tradeoff`: training FLOPs against training peak.
- :func:`draw_runs`: time (median, p25-p75) and measured peak of each run; a run that
  timed its steps (``--profile-steps``) shows them as segments of its bar, the costliest
  named with its share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..render.formatting import format_bytes, format_count, format_seconds
from .data import FigureData, RunBar, TimelineSeries, TradeoffPoint, TreeData
from .layout import labelled_nodes, layout_tree

# matplotlib is optional: its objects are typed as Any, so that the package type-checks
# the same with and without the extra installed.
Axes = Any
Figure = Any

__all__ = [
    "FATE_COLOURS",
    "CAPTIONS",
    "FIGURES",
    "RC",
    "draw_figure",
    "draw_page",
    "draw_runs",
    "draw_timeline",
    "draw_tradeoff",
    "draw_tree",
]

FIGURES = ("timeline", "tree", "tradeoff", "runs")

CAPTIONS: dict[str, str] = {
    "timeline": "Memory over forward then backward: the live bytes of every modelled "
                "strategy at each event of its schedule, inputs included, each peak marked "
                "(runs add their measured peaks).",
    "tree": "The forward contraction tree: each intermediate with its labels, the labels "
            "it sums and its size, coloured by what the strategy does with it (kept for "
            "backward, recomputed).",
    "tradeoff": "Training FLOPs against training peak: each strategy on the report's path "
                "and torch autograd's model; with a search or a limit sweep, their plans "
                "and the recommended one.",
    "runs": "The runs: median forward and backward time per call and the measured peak of "
            "each strategy on each device.",
}
"""What each figure shows, one sentence each: the HTML report's captions."""
"""The figures, in the order a page shows them."""

FATE_COLOURS = {
    "input": "#4d4d4d",
    "retained": "#d95f02",
    "recomputed": "#7570b3",
    "freed": "#b3b3b3",
    "output": "#1b9e77",
}

RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text stays text: searchable, and labels testable
    "svg.hashsalt": "einsum-analyze",  # the same SVG for the same data
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 8,
    "path.simplify": True,
}

_STYLES = ("-", "--", "-.", ":")
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f")


def byte_ticks(top: float) -> list[float]:
    """Ticks from 0 to ``top`` at round multiples of a binary unit (B, KiB, MiB, ...).

    Example:
        >>> byte_ticks(5 * 1024)
        [0.0, 1024.0, 2048.0, 3072.0, 4096.0, 5120.0]
    """
    if top <= 0:
        return [0.0]
    unit = 1
    while top / unit >= 1024 and unit < 1024**5:
        unit *= 1024
    span = top / unit
    step = next(s for s in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200,
                            250, 500, 1000, 2000, 5000) if span / s <= 6 or s == 5000)
    count = int(span / step + 1e-9)
    return [float(i * step * unit) for i in range(count + 1)]


def _bytes_axis(axis: Any, top: float) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter

    axis.set_major_locator(FixedLocator(byte_ticks(top)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: _tick_bytes(value)))


def _tick_bytes(value: float) -> str:
    """A tick's bytes, without needless zeros: 1.50 KiB stays, 2.00 MiB reads 2 MiB."""
    text = format_bytes(int(round(value)))
    number, _, unit = text.partition(" ")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib import figure

    return figure.Figure(figsize=(width, height), layout="constrained")


def _stretch(series: TimelineSeries) -> tuple[list[float], list[int]]:
    """X in [0, 2] (forward in [0, 1], backward in [1, 2]) and y, inputs first."""
    count = len(series.high_bytes)
    start = series.backward_start
    first = series.high_bytes[0] if count else 0
    xs: list[float] = [0.0]
    ys: list[int] = [first]
    for i, value in enumerate(series.high_bytes):
        if i < start:
            xs.append((i + 1) / max(start, 1))
        else:
            xs.append(1.0 + (i - start + 1) / max(count - start, 1))
        ys.append(value)
    if len(xs) > 2 * _MAX_POINTS:
        return _envelope(xs, ys)
    return xs, ys


_MAX_POINTS = 2000
"""Points of a timeline past which it is drawn as the maximum over buckets (the peak
kept): a figure has fewer pixels than a 100,000-event schedule has events."""


def _envelope(xs: Sequence[float], ys: Sequence[int]) -> tuple[list[float], list[int]]:
    """The step line's maximum over :data:`_MAX_POINTS` buckets of x."""
    out_x: list[float] = [xs[0]]
    out_y: list[int] = [ys[0]]
    width = (xs[-1] - xs[0]) / _MAX_POINTS or 1.0
    bucket, high = 0, ys[1]
    for x, y in zip(xs[1:], ys[1:], strict=True):
        here = min(int((x - xs[0]) / width), _MAX_POINTS - 1)
        if here != bucket:
            out_x.append(xs[0] + (bucket + 1) * width)
            out_y.append(high)
            bucket, high = here, y
        else:
            high = max(high, y)
    out_x.append(xs[-1])
    out_y.append(high)
    return out_x, out_y


def _peak_text(series: TimelineSeries, others: Sequence[TimelineSeries]) -> str:
    """The peak as printed.

    With its exact bytes when another peak prints the same but differs (strategies that
    nearly coincide).
    """
    text = format_bytes(series.peak_bytes)
    if any(format_bytes(o.peak_bytes) == text and o.peak_bytes != series.peak_bytes
           for o in others):
        return f"{text} ({series.peak_bytes:,} B)"
    return text


def _peak_x(series: TimelineSeries) -> float:
    """X of the peak event on the stretched axis."""
    event, start, count = series.peak_event, series.backward_start, len(series.high_bytes)
    if event < 0:
        return 0.0
    if event < start:
        return (event + 1) / max(start, 1)
    return 1.0 + (event - start + 1) / max(count - start, 1)


def draw_timeline(ax: Axes, data: FigureData) -> None:
    """Predicted memory of every strategy, with the phase boundary, peaks and runs."""
    if not data.timeline:
        _empty(ax, "no strategy was modelled (--strategy none)")
        ax.set_title("Memory over forward and backward (predicted)")
        return
    ax.axhspan(0, data.input_bytes, color="#dddddd", zorder=0, lw=0,
               label=f"inputs: {format_bytes(data.input_bytes)} (the shaded band)")
    ax.axvline(1.0, color="#555555", lw=0.8, ls=(0, (4, 3)), zorder=1)
    top = data.input_bytes
    # Series of fewer events are drawn on top: they are the ones a busy one would hide.
    rank = {name: r for r, name in enumerate(
        s.name for s in sorted(data.timeline, key=lambda s: -len(s.high_bytes)))}
    for k, series in enumerate(data.timeline):
        colour = _COLOURS[k % len(_COLOURS)]
        xs, ys = _stretch(series)
        # Later series are thinner: where strategies coincide every one stays visible.
        width = (3.4, 2.4, 1.6, 1.1)[min(k, 3)]
        ax.step(xs, ys, where="pre", color=colour, lw=width, ls=_STYLES[k % len(_STYLES)],
                alpha=0.85, zorder=2 + rank[series.name],
                label=f"{series.name}: peak {_peak_text(series, data.timeline)}")
        peak_x = _peak_x(series)
        ax.plot([peak_x], [series.peak_bytes], marker="o", ms=6, color=colour,
                mec="white", zorder=20)
        for device, measured in series.measured:
            ax.plot([peak_x], [measured], marker="X", ms=8, color=colour, mec="black",
                    mew=0.6, ls="none", zorder=21,
                    label=f"{series.name} measured on {device}: {format_bytes(measured)}")
            top = max(top, measured)
        for device, trace, start in series.trace:
            if trace:
                tx, ty = _stretch(TimelineSeries(
                    name=series.name, high_bytes=trace, backward_start=start,
                    peak_event=-1, peak_bytes=max(trace)))
                ax.step(tx, ty, where="pre", color="black", lw=0.7, ls=":", zorder=15,
                        label=f"{series.name} recorded on {device}: peak "
                        f"{format_bytes(max(trace))}")
                top = max(top, max(trace))
        top = max(top, series.peak_bytes)
    if data.budget_bytes is not None:
        _budget_line(ax, data.budget_bytes)
        top = max(top, data.budget_bytes)
    ax.set_xlim(0.0, 2.0)
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    ax.set_xticks([0.0, 0.5, 1.0, 1.5, 2.0])
    ax.set_xticklabels(["start", "forward", "forward | backward", "backward", "end"])
    _bytes_axis(ax.yaxis, top * 1.12)
    ax.set_ylabel("live bytes (inputs included)")
    ax.set_title("Memory over forward and backward (predicted)")
    ax.legend(loc="upper left", frameon=True, framealpha=0.9)


def draw_tree(ax: Axes, tree: TreeData | None) -> None:
    """The forward tree, coloured by what the strategy does with each intermediate."""
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    if tree is None:
        _empty(ax, "this report has no tree")
        return
    layout = layout_tree(tree.parent)
    x, y = layout.x, layout.y
    segments = [((x[node], y[node]), (x[up], y[up]))
                for node, up in enumerate(tree.parent) if up >= 0]
    ax.add_collection(LineCollection(segments, colors="#999999", linewidths=0.8, zorder=1))
    largest = max(max(tree.bytes, default=1), 1)
    sizes = [12 + 150 * (math.log1p(b) / math.log1p(largest)) ** 2 for b in tree.bytes]
    colours = [FATE_COLOURS.get(f, "#000000") for f in tree.fates]
    ax.scatter(x, y, s=sizes, c=colours, edgecolors="white", linewidths=0.5, zorder=2)
    shown = labelled_nodes(tree.bytes, tree.num_operands, tree.parent)
    small = tree.num_operands <= 24
    for node in sorted(shown):
        if node < tree.num_operands:
            if small:
                ax.annotate(tree.terms[node] or "()", (x[node], y[node]),
                            xytext=(0, -9), textcoords="offset points", ha="center",
                            va="top", fontsize=7, color="#333333")
            continue
        summed = tree.summed[node]
        text = (f"{tree.terms[node] or '()'}"
                + (f"  \u03a3{summed}" if summed else "")
                + f"\n{format_bytes(tree.bytes[node])}")
        ax.annotate(text, (x[node], y[node]), xytext=(6, 2), textcoords="offset points",
                    ha="left", va="bottom", fontsize=7, color="#222222", zorder=3,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.75})
    width = max(max(x, default=0.0), 1.0)
    height = max(max(y, default=0), 1)
    ax.set_xlim(-0.8, width + max(2.0, width * 0.08))
    ax.set_ylim(-0.9 if small else -0.5, height + 0.6 + 0.06 * height)
    ax.set_xticks([])
    step = max(1, math.ceil(height / 8))
    ax.set_yticks(range(0, height + 1, step))
    ax.set_ylabel("height in the tree (operands at 0)")
    ax.spines[["top", "right", "bottom"]].set_visible(False)
    used = [f for f in FATE_COLOURS if f in set(tree.fates)]
    handles = [Line2D([], [], marker="o", ls="none", color=FATE_COLOURS[f], label=f)
               for f in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title=f"fate under\n{tree.strategy}", frameon=False)
    note = "" if small else (f"; {tree.num_operands} operands: labels on the "
                             f"{len(shown)} largest intermediates")
    ax.set_title(f"Forward contraction tree (\u03a3: labels summed; size in bytes{note})")


def _budget_line(ax: Axes, budget_bytes: int) -> None:
    """The training budget as a horizontal line, labelled in the legend."""
    ax.axhline(budget_bytes, color="#d62728", lw=1.2, ls=(0, (6, 2)), zorder=19,
               label=f"budget: {format_bytes(budget_bytes)}")


def draw_tradeoff(ax: Axes, points: Sequence[TradeoffPoint],
                  budget_bytes: int | None = None) -> None:
    """Training FLOPs against training peak: strategies, limits, Pareto, recommended."""
    if not points:
        _empty(ax, "no strategy was modelled")
        return
    if budget_bytes is not None:
        _budget_line(ax, budget_bytes)
    styles: dict[str, dict[str, Any]] = {
        "strategy": {"marker": "o", "color": "#1f77b4", "s": 40},
        "torch": {"marker": "s", "color": "#d62728", "s": 55},
        "limit": {"marker": "^", "color": "#9467bd", "s": 30},
        "pareto": {"marker": "D", "color": "#2ca02c", "s": 22},
        "recommended": {"marker": "*", "color": "#ff7f0e", "s": 220},
    }
    names = {"strategy": "strategies on the report's path", "torch": "torch autograd (model)",
             "limit": "--memory-limit sweep", "pareto": "Pareto front of the search",
             "recommended": "recommended plan"}
    pareto = sorted((p for p in points if p.kind == "pareto"), key=lambda p: p.flops)
    if len(pareto) > 1:
        ax.plot([p.flops for p in pareto], [p.peak_bytes for p in pareto], color="#2ca02c",
                lw=0.8, drawstyle="steps-post", zorder=1)
    # Coinciding points are nested: the first of a group largest and lowest, each later
    # one smaller on top, so that every marker shows (reverse under torch's square, say).
    nesting = _nesting(points)
    labelled: set[str] = set()
    for number, point in enumerate(points):
        style = dict(styles[point.kind])
        rank, size = nesting[number]
        style["s"] = style["s"] * (1 + 1.2 * (size - 1 - rank))
        ax.scatter([point.flops], [point.peak_bytes],
                   label=names[point.kind] if point.kind not in labelled else None,
                   edgecolors="black", linewidths=0.5,
                   zorder=(8 if point.kind == "recommended" else 3) + rank, **style)
        labelled.add(point.kind)
    flops = [p.flops for p in points]
    if min(flops) > 0 and max(flops) / min(flops) > 20:
        ax.set_xscale("log")
    top = max(max([p.peak_bytes for p in points] + [budget_bytes or 0]) * 1.15, 1)
    ax.set_ylim(0, top)
    _bytes_axis(ax.yaxis, top)
    if ax.get_xscale() != "log":
        from matplotlib.ticker import FuncFormatter, MaxNLocator

        # From zero: where every plan costs the same, the axis still reads plainly.
        ax.set_xlim(0, max(max(flops) * 1.15, 1))
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(int(v))))
    _label_points(ax, points)
    ax.set_xlabel("training FLOPs (forward + backward + recompute)")
    ax.set_ylabel("training peak (inputs included)")
    ax.set_title("Trade-off: FLOPs against memory")
    legend = ax.legend(loc="best", frameon=True, framealpha=0.9)
    for handle in getattr(legend, "legend_handles", ()):  # one size each, nesting aside
        if hasattr(handle, "set_sizes"):
            handle.set_sizes([40])


def _nesting(points: Sequence[TradeoffPoint]) -> list[tuple[int, int]]:
    """``(rank in its group, group size)`` of every point, groups of coinciding points."""
    groups: list[list[int]] = []
    for number, point in enumerate(points):
        for group in groups:
            first = points[group[0]]
            if (abs(point.flops - first.flops) <= 0.02 * max(first.flops, 1)
                    and abs(point.peak_bytes - first.peak_bytes)
                    <= 0.02 * max(first.peak_bytes, 1)):
                group.append(number)
                break
        else:
            groups.append([number])
    found = [(0, 1)] * len(points)
    for group in groups:
        for rank, number in enumerate(group):
            found[number] = (rank, len(group))
    return found


def _label_points(ax: Axes, points: Sequence[TradeoffPoint]) -> None:
    """Name the strategies' points, one label per coinciding group, inside the axes."""
    left, right = ax.get_xlim()
    log = ax.get_xscale() == "log"
    for (x, y), names_here in _coincident(
            [p for p in points if p.kind in ("strategy", "torch", "recommended")]):
        if log:
            import math

            share = (math.log10(max(x, 1e-300)) - math.log10(left)) / (
                math.log10(right) - math.log10(left))
        else:
            share = (x - left) / (right - left) if right > left else 0.0
        on_left = share > 0.6  # near the right edge the label goes to the left
        ax.annotate(", ".join(names_here), (x, y), xytext=(-7 if on_left else 7, 5),
                    textcoords="offset points", fontsize=7,
                    ha="right" if on_left else "left", annotation_clip=True,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.8})


def _coincident(points: Sequence[TradeoffPoint]) -> list[tuple[tuple[int, int], list[str]]]:
    """Points grouped where they (nearly) coincide, so that labels do not overprint."""
    groups: list[tuple[tuple[int, int], list[str]]] = []
    for point in points:
        name = point.label.split(":")[0]
        for (flops, peak), names in groups:
            if (abs(point.flops - flops) <= 0.02 * max(flops, 1)
                    and abs(point.peak_bytes - peak) <= 0.02 * max(peak, 1)):
                if name not in names:
                    names.append(name)
                break
        else:
            groups.append(((point.flops, point.peak_bytes), [name]))
    return groups


def draw_runs(axes: tuple[Axes, Axes], runs: Sequence[RunBar]) -> None:
    """Median forward + backward time (p25-p75 whiskers) and peak of every run."""
    time_ax, peak_ax = axes
    if not runs:
        _empty(time_ax, "nothing ran (--device none): no measured time or peak")
        peak_ax.set_visible(False)
        return
    ys = list(range(len(runs)))
    colours = ["#d62728" if r.is_baseline else "#1f77b4" for r in runs]
    medians = [r.median_s for r in runs]
    low = [max(r.median_s - r.low_s, 0.0) for r in runs]
    high = [max(r.high_s - r.median_s, 0.0) for r in runs]
    time_ax.barh(ys, medians, xerr=[low, high], color=colours, alpha=0.85,
                 error_kw={"ecolor": "black", "capsize": 3, "lw": 0.8})
    for y, run in zip(ys, runs, strict=True):
        if run.steps:
            _draw_steps(time_ax, y, run)
    for y, run in zip(ys, runs, strict=True):
        time_ax.annotate(format_seconds(run.median_s), (max(run.high_s, run.median_s), y),
                         xytext=(6, 0),
                         textcoords="offset points", va="center", fontsize=7)
    time_ax.set_yticks(ys, [r.label for r in runs])
    time_ax.invert_yaxis()
    time_ax.set_xlim(0, max(r.high_s for r in runs) * 1.3 or 1.0)
    from matplotlib.ticker import FuncFormatter

    time_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_seconds(v)
                                                    if v > 0 else "0"))
    time_ax.set_xlabel("forward + backward, median (whiskers p25-p75)")
    time_ax.set_title("Runs: time (red: torch baselines)")
    measured = [r.peak_bytes_measured or 0 for r in runs]
    predicted = [r.peak_bytes_predicted for r in runs]
    peak_ax.barh(ys, measured, color=colours, alpha=0.85, label="measured")
    marks = [(p, y) for p, y in zip(predicted, ys, strict=True) if p is not None]
    if marks:
        peak_ax.plot([p for p, _ in marks], [y for _, y in marks], marker="|", ms=14,
                     mew=2, color="black", ls="none", label="predicted")
    for y, run in zip(ys, runs, strict=True):
        text = (format_bytes(run.peak_bytes_measured) if run.peak_bytes_measured is not None
                else "not measured")
        peak_ax.annotate(text, (run.peak_bytes_measured or 0, y), xytext=(4, 0),
                         textcoords="offset points", va="center", fontsize=7)
    peak_ax.set_yticks(ys, [""] * len(runs))
    peak_ax.set_ylim(time_ax.get_ylim())
    top = max([*measured, *(p for p in predicted if p is not None), 1])
    peak_ax.set_xlim(0, top * 1.35)
    _bytes_axis(peak_ax.xaxis, top * 1.35)
    peak_ax.set_xlabel("peak of forward + backward (inputs included)")
    peak_ax.set_title("Runs: measured peak")
    peak_ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def _draw_steps(ax: Axes, y: int, run: RunBar) -> None:
    """A run's timed steps as segments over its bar, the costliest one named.

    The segments follow schedule order and are scaled to the bar (the median), so each
    one's length is its share of forward + backward (``--profile-steps``).
    """
    total = sum(seconds for _, seconds in run.steps)
    if total <= 0:
        return
    scale = run.median_s / total
    left = 0.0
    for number, (_, seconds) in enumerate(run.steps):
        width = seconds * scale
        ax.barh([y], [width], left=[left], height=0.5, color="white",
                alpha=0.45 if number % 2 else 0.15, edgecolor="white", linewidth=0.4)
        left += width
    label, seconds = max(run.steps[:-1], key=lambda step: step[1])
    start = sum(s for _, s in run.steps[:run.steps.index((label, seconds))]) * scale
    ax.annotate(f"{label} {seconds / total:.0%}", (start + seconds * scale / 2, y - 0.3),
                ha="center", va="bottom", fontsize=6, color="#222222")


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes,
            color="#777777")
    ax.set_xticks([])
    ax.set_yticks([])


def draw_figure(kind: str, data: FigureData) -> Figure:
    """One figure, alone on its own :class:`~matplotlib.figure.Figure`."""
    if kind == "timeline":
        fig = _new_figure(8.0, 4.2)
        draw_timeline(fig.add_subplot(), data)
    elif kind == "tree":
        num_ops = data.tree.num_operands if data.tree is not None else 1
        fig = _new_figure(min(8.0 + 0.06 * num_ops, 14.0), 5.0 if num_ops <= 24 else 6.5)
        draw_tree(fig.add_subplot(), data.tree)
    elif kind == "tradeoff":
        fig = _new_figure(7.0, 4.2)
        draw_tradeoff(fig.add_subplot(), data.tradeoff, data.budget_bytes)
    elif kind == "runs":
        fig = _new_figure(9.0, 1.4 + 0.32 * max(len(data.runs), 2) if data.runs else 1.5)
        left, right = fig.subplots(1, 2)
        draw_runs((left, right), data.runs)
    else:
        raise ValueError(f"unknown figure {kind!r}; the figures are {', '.join(FIGURES)}")
    fig.suptitle(_short(data.title), fontsize=9, color="#444444")
    return fig


def draw_page(data: FigureData) -> Figure:
    """All four figures on one page (a PNG, SVG or PDF page per report)."""
    num_ops = data.tree.num_operands if data.tree is not None else 1
    tree_height = 5.0 if num_ops <= 24 else 6.5
    runs_height = 1.4 + 0.32 * max(len(data.runs), 2) if data.runs else 0.8
    fig = _new_figure(11.0, 4.4 + tree_height + 4.2 + runs_height)
    sub: Any = fig.subfigures(4, 1, height_ratios=[4.4, tree_height, 4.2, runs_height])
    draw_timeline(sub[0].add_subplot(), data)
    draw_tree(sub[1].add_subplot(), data.tree)
    draw_tradeoff(sub[2].add_subplot(), data.tradeoff, data.budget_bytes)
    left, right = sub[3].subplots(1, 2)
    draw_runs((left, right), data.runs)
    fig.suptitle(_short(data.title), fontsize=10)
    return fig


def _short(title: str, width: int = 110) -> str:
    """A title that fits a figure: a long equation is cut, with the operand count."""
    if len(title) <= width:
        return title
    operands = title.split("->")[0].count(",") + 1
    return f"{title[:width - 30]}… ({operands} operands)"
