"""Pictures of a report: memory timelines, the contraction tree, the trade-off, the runs.

The figures are drawn from the report's JSON form only (:mod:`.data`), so
``einsum-analyze plot REPORT.json -o PATH`` draws what ``--plot PATH`` drew during the
analysis. The format follows the extension: ``.png``, ``.svg``, ``.pdf`` (one page per
report of a batch) or ``.html`` (one self-contained page, a section per case). A PNG or
SVG of a batch is one file per case, named ``STEM-CASE.EXT``.

matplotlib is an optional extra (``pip install "einsum-analyze[plot]"``); it is imported
only when a figure is drawn, never by the analysis. This package reads JSON data only: it
may import :mod:`einsum_analyze.render.formatting` (figures as people read them) and the
errors, nothing else of the package (docs/architecture.md).
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from ..errors import EinsumAnalyzeError
from ..render.files import check_writable, replace_atomically
from .data import FigureData, case_figures, figure_data

__all__ = [
    "PLOT_FORMATS",
    "FigureData",
    "PlotFormat",
    "PlotUnavailableError",
    "case_figures",
    "check_plot_path",
    "figure_data",
    "matplotlib_available",
    "write_plot",
]

PlotFormat = Literal["png", "svg", "pdf", "html"]
PLOT_FORMATS: tuple[PlotFormat, ...] = get_args(PlotFormat)

INSTALL_HINT = 'plotting needs matplotlib: pip install "einsum-analyze[plot]"'


class PlotUnavailableError(EinsumAnalyzeError):
    """matplotlib is not installed."""


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def plot_format(path: str) -> PlotFormat:
    """The format a path's extension names.

    Raises:
        EinsumAnalyzeError: The extension is not one of :data:`PLOT_FORMATS`.
    """
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    for fmt in PLOT_FORMATS:
        if ext == fmt:
            return fmt
    raise EinsumAnalyzeError(
        f"cannot tell the plot format of {path!r}: give a path ending in "
        + ", ".join(f".{f}" for f in PLOT_FORMATS)
    )


def check_plot_path(path: str) -> PlotFormat:
    """Check, before any analysis, that a plot can be written to ``path``.

    Raises:
        PlotUnavailableError: matplotlib is missing.
        EinsumAnalyzeError: An unknown extension, or a path that cannot be written
            (:func:`~einsum_analyze.render.files.check_writable`).
    """
    fmt = plot_format(path)
    if not matplotlib_available():
        raise PlotUnavailableError(INSTALL_HINT)
    check_writable(path, "the plot")
    return fmt


def write_plot(document: Mapping[str, Any], path: str) -> list[str]:
    """Draw a report (single or batch, as JSON data) into ``path``.

    Returns:
        The files written: ``[path]``, or one per case for a batch as PNG or SVG.

    Raises:
        PlotUnavailableError: matplotlib is missing.
        EinsumAnalyzeError: An unknown extension, or a file that cannot be written.
    """
    fmt = check_plot_path(path)
    import matplotlib

    from .figures import CAPTIONS, FIGURES, RC, draw_figure, draw_page

    cases = case_figures(document)
    written: list[str] = []
    with matplotlib.rc_context(dict(RC)):  # type: ignore[arg-type, unused-ignore]
        try:
            if fmt == "html":
                from .html import html_page

                reports = _case_reports(document)

                def svgs(i: int) -> list[tuple[str, str]]:
                    return [(CAPTIONS[kind], _svg_text(draw_figure(kind, cases[i][1])))
                            for kind in FIGURES]

                text = html_page(document, reports, svgs)
                with replace_atomically(path, "the plot") as temporary, \
                        open(temporary, "w", encoding="utf-8") as stream:
                    stream.write(text)
                written.append(path)
            elif fmt == "pdf":
                from matplotlib.backends.backend_pdf import PdfPages

                with replace_atomically(path, "the plot") as temporary, \
                        PdfPages(temporary, metadata={"Creator": "einsum-analyze"}) as pages:
                    for _, data in cases:
                        pages.savefig(draw_page(data))
                written.append(path)
            else:
                targets = ([path] if "cases" not in document
                           else [_case_path(path, name) for name, _ in cases])
                for target, (_, data) in zip(targets, cases, strict=True):
                    with replace_atomically(target, "the plot") as temporary:
                        draw_page(data).savefig(temporary, format=fmt, **_save_options(fmt))
                    written.append(target)
        except OSError as err:
            raise EinsumAnalyzeError(f"cannot write the plot {path!r}: {err.strerror}") from err
    return written


def _save_options(fmt: str) -> dict[str, Any]:
    if fmt == "png":
        return {"dpi": 110, "metadata": {"Software": "einsum-analyze"}}
    return {"metadata": {"Date": None, "Creator": "einsum-analyze"}}


def _svg_text(figure: Any) -> str:
    stream = io.StringIO()
    figure.savefig(stream, format="svg", metadata={"Date": None})
    return stream.getvalue()


def _case_reports(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    if "cases" not in document:
        return [("", document)]
    return [(c["name"], c["report"]) for c in document["cases"] if "report" in c]


def _case_path(path: str, name: str) -> str:
    stem, ext = os.path.splitext(path)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "case"
    return f"{stem}-{safe}{ext}"
