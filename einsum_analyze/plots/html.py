r"""The one-file HTML report: tables, the figures as inline SVG, the report's JSON embedded.

The page loads nothing: no script, font or stylesheet from a URL, so it opens offline
and can be attached to a pull request or kept as a CI artifact. Inline SVG needs no
namespace declaration in HTML, so the URLs matplotlib writes there (namespaces and
metadata) are removed. The JSON is embedded with ``/`` written ``\/`` and ``<`` written
``\u003c``: still the same JSON, but no ``</script>`` can end the block early and no URL
appears in the page.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..render.formatting import format_bytes, format_count, format_seconds

__all__ = ["JSON_ELEMENT_ID", "embed_json", "html_page", "inline_svg"]

JSON_ELEMENT_ID = "einsum-analyze-report"
"""The id of the ``<script type="application/json">`` element that holds the report."""

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.15em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1em;margin-bottom:.3em}
code{font-family:ui-monospace,Menlo,Consolas,monospace;background:#f4f4f4;padding:0 .2em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f6f6f6}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}
.warn{color:#8a5a00}.fail{color:#b00020;font-weight:600}.pass{color:#1a7f37}
"""

_STATUS_ORDER = {"error": 0, "budget-exceeded": 1, "ok": 2}
_STATUS_WORDS = {"error": "error", "budget-exceeded": "budget exceeded", "ok": "ok"}


def inline_svg(svg: str) -> str:
    """An SVG document from matplotlib as an element for an HTML page.

    No XML prolog, no DOCTYPE, no metadata, no namespace URLs.
    """
    start = svg.find("<svg")
    body = svg[start:]
    body = re.sub(r"<metadata>.*?</metadata>", "", body, flags=re.S)
    body = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", body)
    return body.strip()


def embed_json(document: Mapping[str, Any] | Sequence[Any]) -> str:
    """The document as JSON that is safe inside ``<script>`` and carries no URL."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("/", "\\/").replace("<", "\\u003c")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _report_tables(report: Mapping[str, Any]) -> str:
    forward = report["forward"]
    parts = [_table(
        ["forward", "value"],
        [["equation", str(report["equation"])], ["dtype", str(report["dtype"])],
         ["optimizer", str(forward["optimizer"])],
         ["FLOPs", format_count(int(forward["flops"]))],
         ["inputs", format_bytes(int(forward["input_bytes"]))],
         ["inference peak", format_bytes(int(forward["peak_bytes"]))]],
    )]
    strategies = report.get("strategies", [])
    if strategies:
        parts.append(_table(
            ["strategy", "forward FLOPs", "backward FLOPs", "retained", "training peak"],
            [[s["name"], format_count(int(s["forward_flops"])),
              format_count(int(s["backward_flops"])), format_bytes(int(s["retained_bytes"])),
              format_bytes(int(s["peak_bytes"]))] for s in strategies],
        ))
    runs = report.get("runs", [])
    if runs:
        def seconds(stats: Mapping[str, Any] | None) -> str:
            return format_seconds(float(stats["median"])) if stats else "-"

        def maybe_bytes(value: int | None) -> str:
            return format_bytes(int(value)) if value is not None else "-"

        parts.append(_table(
            ["run", "device", "forward", "backward", "peak measured", "peak predicted",
             "note"],
            [[r["strategy"], r["device"], seconds(r.get("forward_s")),
              seconds(r.get("backward_s")), maybe_bytes(r.get("peak_bytes_measured")),
              maybe_bytes(r.get("peak_bytes_predicted")), r.get("skipped") or ""]
             for r in runs],
        ))
    rec = report.get("recommended")
    if rec is not None:
        parts.append(f"<p>Recommended: <code>{html.escape(rec['strategy'])}</code> on the "
                     f"{html.escape(rec['source'])} path, training peak "
                     f"{format_bytes(int(rec['peak_bytes']))}, "
                     f"{format_count(int(rec['training_flops']))} training FLOPs.</p>")
    parts.append(_budgets_table(report.get("budgets") or []))
    warnings = report.get("warnings", [])
    if warnings:
        items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
        parts.append(f"<h3>Warnings</h3><ul class=\"warn\">{items}</ul>")
    return "\n".join(parts)


def _figure(value: object, unit: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "not measured"
    match unit:
        case "flops":
            return format_count(int(value))
        case "bytes":
            return format_bytes(int(value))
        case "s":
            return format_seconds(float(value))
    return str(value)


def _budgets_table(budgets: Sequence[Mapping[str, Any]]) -> str:
    """Every budget: its figure, its limit, and whether it passed; ``""`` without any."""
    if not budgets:
        return ""
    rows = []
    for budget in budgets:
        passed = bool(budget.get("passed"))
        result = ("pass" if passed and budget.get("value") is not None
                  else "not measured" if passed else "EXCEEDED")
        css = "pass" if passed else "fail"
        rows.append(
            f"<tr><td>{html.escape(str(budget.get('name')))}</td>"
            f"<td>{html.escape(str(budget.get('subject')))}</td>"
            f"<td>{html.escape(_figure(budget.get('value'), budget.get('unit')))}</td>"
            f"<td>{html.escape(_figure(budget.get('limit'), budget.get('unit')))}</td>"
            f"<td class=\"{css}\">{result}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("budget", "subject", "value", "limit", "result"))
    return (f"<table class=\"budgets\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _summary(entries: Sequence[Mapping[str, Any]]) -> str:
    """``4 cases: 1 error, 1 budget exceeded, 2 ok``: every case counted."""
    counts = {status: sum(1 for e in entries if e.get("status") == status)
              for status in _STATUS_ORDER}
    parts = [f"{count} {_STATUS_WORDS[status]}" for status, count in counts.items() if count]
    noun = "case" if len(entries) == 1 else "cases"
    return f"{len(entries)} {noun}: " + ", ".join(parts) if parts else f"{len(entries)} {noun}"


def html_page(document: Mapping[str, Any], cases: Sequence[tuple[str, Mapping[str, Any]]],
              svgs: Callable[[int], Sequence[tuple[str, str]]]) -> str:
    """The whole page.

    Args:
        document: The report (single or batch) as JSON data; embedded whole.
        cases: ``(name, report)`` of each section (name empty for a single report).
        svgs: For section ``i``, ``(caption, SVG text)`` of each figure.
    """
    figures_of = {name: i for i, (name, _) in enumerate(cases)}

    def figures(i: int) -> str:
        return "\n".join(
            f"<figure>{inline_svg(svg)}<figcaption>{html.escape(caption)}</figcaption>"
            "</figure>"
            for caption, svg in svgs(i)
        )

    if "cases" not in document:
        title = "einsum-analyze: " + str(document["equation"])
        sections = [f"<section>{_report_tables(report)}\n{figures(i)}</section>"
                    for i, (_, report) in enumerate(cases)]
    else:
        entries = [c for c in document["cases"] if isinstance(c, Mapping)]
        title = f"einsum-analyze: {_summary(entries)}"
        # Failed cases first: what broke the build is what a reviewer opens the page for.
        ordered = sorted(entries, key=lambda c: _STATUS_ORDER.get(str(c.get("status")), 0))
        sections = []
        for entry in ordered:
            name, status = str(entry.get("name")), str(entry.get("status"))
            css = "pass" if status == "ok" else "fail"
            report = entry.get("report")
            equation = (f": <code>{html.escape(str(report['equation']))}</code>"
                        if isinstance(report, Mapping) else "")
            heading = (f"<h2 id=\"case-{html.escape(name)}\">{html.escape(name)}{equation} "
                       f"<span class=\"{css}\">{_STATUS_WORDS.get(status, status)}</span></h2>")
            if not isinstance(report, Mapping):
                error = html.escape(str(entry.get("error", "")))
                sections.append(f"<section>{heading}<p class=\"fail\">Error: {error}</p>"
                                "</section>")
                continue
            sections.append(f"<section>{heading}{_report_tables(report)}\n"
                            f"{figures(figures_of[name])}</section>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>\n" + "\n".join(sections)
        + f"\n<script type=\"application/json\" id=\"{JSON_ELEMENT_ID}\">"
        + embed_json(document) + "</script>\n</body></html>\n"
    )
