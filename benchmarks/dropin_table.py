"""bench_dropin.py's verdicts and tables: the issue's targets, ratios, the summary lines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

RUNS = ("torch", "torch-again", "torch-compiled", "oe-expr", "ours", "ours-reverse",
        "ours-compiled", "ours-graphs", "torch-reduce-overhead")


def auto_verdict(result: dict[str, Any]) -> str:
    """Whether ``"auto"`` chose right on one case, against the measured runs.

    Replaying is right where ``ours-graphs`` measured faster than ``ours`` (the eager
    call, torch.einsum's where the plan runs it); staying eager is right where the graphs
    measured above the choice's margin of it (``TIME_MARGIN``, 0.9: auto asks for a gain
    of a tenth before it holds graph memory between calls).
    """
    from einsum_analyze.training.choice import TIME_MARGIN

    line = result["choice"].get("auto_graphs") or ""
    runs = result["runs"]
    if not line or "seconds" not in runs["ours-graphs"] or "seconds" not in runs["ours"]:
        return ""
    engaged = line.startswith("replays")
    ratio = runs["ours-graphs"]["seconds"] / runs["ours"]["seconds"]
    right = ratio <= 1.0 if engaged else ratio >= TIME_MARGIN
    return (f"{'right' if right else 'WRONG'}: auto "
            f"{'replays' if engaged else 'stays eager'}, ours-graphs/ours {ratio:.2f}")


TIME_RATIO = 1.03
"""Ours at most this multiple of torch.einsum's time where torch.einsum takes over
``SHORT_S``."""
SHORT_S = 50e-6
SHORT_SLACK_S = 10e-6
"""Below ``SHORT_S``, ours at most this many seconds above torch.einsum's time."""
GEOMEAN_RATIO = 0.55
"""The geometric mean of ours/torch over benchmarks/cases.json, at most."""


def targets(runs: dict[str, dict[str, Any]],
            confirmed: dict[str, float] | None = None) -> dict[str, Any]:
    """Whether ours meets the time and peak targets against torch.einsum on one case.

    ``confirmed``: the second, longer measurement of a missed time target
    (``bench_dropin.confirm``), which then decides the time verdict.
    """
    ours, theirs = runs["ours"], runs["torch"]
    if "seconds" not in ours or "seconds" not in theirs:
        return {}
    # the paired ratio (per round, blocks moments apart) where the run has it
    ratio = ours.get("paired_vs_torch", ours["seconds"] / theirs["seconds"])
    if confirmed is not None:
        ratio = confirmed["ours_paired"]
    if theirs["seconds"] > SHORT_S:
        time_ok = ratio <= TIME_RATIO
        rule = f"<= {TIME_RATIO}x"
    else:
        time_ok = (ratio - 1.0) * theirs["seconds"] <= SHORT_SLACK_S
        rule = f"<= +{SHORT_SLACK_S * 1e6:.0f} us"
    if confirmed is not None:
        noise = confirmed["noise_paired"]
        rule += (f"; measured again over {confirmed['rounds']} longer rounds: "
                 f"{confirmed['ours_paired']:.3f}x"
                 + ("" if math.isnan(noise) else f", torch against itself {noise:.3f}x"))
    return {"time_rule": rule, "time_ok": time_ok, "confirmed": confirmed,
            "peak_ok": ours["peak_bytes_without_inputs"] <= theirs["peak_bytes_without_inputs"]}


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def table(results: list[dict]) -> tuple[list[str], list[str]]:
    """Markdown rows (times, then peaks) and the summary lines."""
    def ms(run: dict[str, Any]) -> str:
        return f"{run['seconds'] * 1e3:.3f}" if "seconds" in run else "skip"

    def mib(run: dict[str, Any]) -> str:
        return (f"{run['peak_bytes_without_inputs'] / 2**20:.3f}" if "seconds" in run
                else "skip")

    pairs = (("ours", "torch"), ("torch-again", "torch"), ("ours", "torch-compiled"),
             ("ours-compiled", "torch-compiled"), ("ours-compiled", "ours"),
             ("oe-expr", "torch"), ("ours-reverse", "torch"), ("ours-graphs", "torch"),
             ("ours-graphs", "torch-reduce-overhead"), ("ours", "torch-reduce-overhead"))
    header = (["case"] + [f"{r} ms" for r in RUNS] + [f"{a}/{b}" for a, b in pairs]
              + ["ours/torch paired", "torch-again/torch paired", "ours/torch fastest blocks",
                 "runs", "time target", "peak target"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    peak_header = ["case"] + [f"{r} peak MiB" for r in RUNS] + ["peak ours/torch"]
    peak_lines = ["| " + " | ".join(peak_header) + " |", "|" + "---|" * len(peak_header)]
    ratios: dict[str, list[float]] = {}
    missed: list[str] = []
    for result in results:
        runs = result["runs"]

        def ratio(a: str, b: str, key: str = "seconds", runs: dict = runs,
                  group: str = result["set"]) -> str:
            if key not in runs[a] or key not in runs[b] or not runs[b][key]:
                return "-"
            value = runs[a][key] / runs[b][key]
            ratios.setdefault(f"{a}/{b} {key} ({group})", []).append(value)
            return f"{value:.2f}"

        def paired(a: str, runs: dict = runs, group: str = result["set"]) -> str:
            if "paired_vs_torch" not in runs[a]:
                return "-"
            value = runs[a]["paired_vs_torch"]
            ratios.setdefault(f"{a}/torch paired ({group})", []).append(value)
            return f"{value:.3f}"

        goal = result["targets"]
        time_cell = (f"{'ok' if goal['time_ok'] else 'MISSED'} ({goal['time_rule']})"
                     if goal else "-")
        peak_cell = ("ok" if goal["peak_ok"] else "MISSED") if goal else "-"
        if goal and not (goal["time_ok"] and goal["peak_ok"]):
            missed.append(result["name"])
        lines.append("| " + " | ".join(
            [result["name"]] + [ms(runs[r]) for r in RUNS] + [ratio(a, b) for a, b in pairs]
            + [paired("ours"), paired("torch-again"), ratio("ours", "torch", "min_seconds"),
               result["choice"]["runs"], time_cell,
               peak_cell]) + " |")
        peak_lines.append("| " + " | ".join(
            [result["name"]] + [mib(runs[r]) for r in RUNS]
            + [ratio("ours", "torch", "peak_bytes_without_inputs")]) + " |")
    summary = [f"{label}: geometric mean {geomean(values):.3f}x over {len(values)} cases"
               for label, values in ratios.items()]
    cases_mean = geomean(ratios.get("ours/torch seconds (cases)", []))
    if not math.isnan(cases_mean):
        summary.append(f"target: geometric mean ours/torch over cases.json {cases_mean:.3f}x "
                       f"({'ok' if cases_mean <= GEOMEAN_RATIO else 'MISSED'}: "
                       f"<= {GEOMEAN_RATIO})")
    summary.append("targets missed (time or peak): " + (", ".join(missed) or "none"))
    graph_rows = [(r["name"], r["runs"]["ours-graphs"]["seconds"],
                   r["runs"]["torch-reduce-overhead"]["seconds"]) for r in results
                  if "seconds" in r["runs"]["ours-graphs"]
                  and "seconds" in r["runs"]["torch-reduce-overhead"]
                  and r["runs"]["torch-reduce-overhead"]["seconds"] > SHORT_S]
    if graph_rows:
        slower = [name for name, ours, theirs in graph_rows if ours > theirs]
        summary.append(f"target: ours-graphs <= torch-reduce-overhead above "
                       f"{SHORT_S * 1e6:.0f} us: missed on {', '.join(slower) or 'none'} "
                       f"({len(graph_rows)} cases)")
    for kind in ("seconds", "paired"):
        noise = [abs(math.log(v)) for label, values in ratios.items()
                 if label.startswith(f"torch-again/torch {kind}") for v in values]
        if noise:
            summary.append(f"noise: torch.einsum against itself (torch-again/torch, "
                           f"{'medians' if kind == 'seconds' else 'paired'}) up to "
                           f"{math.exp(max(noise)):.3f}x apart, the same kernels timed twice")
    reasons = ["What ours ran, and why:"] + [
        f"  {r['name']}: {r['choice']['reason']}" for r in results]
    reasons += ["CUDA graphs (ours-graphs), per cache_info():"] + [
        f"  {r['name']}: {r['choice'].get('graphs') or '-'}" for r in results]
    verdicts = [(r["name"], auto_verdict(r)) for r in results if auto_verdict(r)]
    if verdicts:
        reasons += ["cuda_graphs='auto' against the measured runs:"] + [
            f"  {name}: {verdict}" for name, verdict in verdicts]
        right = sum(verdict.startswith("right") for _, verdict in verdicts)
        summary_auto = [f"cuda_graphs='auto': right on {right} of {len(verdicts)} cases"]
    else:
        summary_auto = []
    return lines + [""] + peak_lines + [""] + reasons, summary + summary_auto
