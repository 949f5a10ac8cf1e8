"""The CLI's two verbs on saved reports: ``compare BEFORE AFTER`` and ``plot REPORT -o PATH``.

``einsum-analyze compare ...`` and ``einsum-analyze plot ...`` reach these commands
through the analysis command (:mod:`einsum_analyze.cli`), which routes a first argument
``compare`` or ``plot`` here.
"""

from __future__ import annotations

from typing import Any

import click

from ..errors import EinsumAnalyzeError
from ..render.terminal import console, write_json
from ..report.compare_times import TIME_RULES, TimeRule
from .base import InputError, OneLineErrors

__all__ = ["compare_cli", "plot_cli", "read_report", "write_plot"]

_COMPARE_EPILOG = """\b
Rules:
  FLOPs and modelled memory are exact: any increase is a regression (forward
  flops and peak_bytes; per strategy backward_flops, retained_bytes and
  peak_bytes; each run's measured peak and retained bytes). Timings (each run's
  median forward_s and backward_s) are divided by the torch-autograd baseline's,
  measured in the same report, so that the load of the moment cancels; they
  regress when the ratio grows by more than --tolerance plus the medians'
  notches (1.57 IQR / sqrt(blocks), each report records both). --times seconds
  compares the seconds themselves. A budget that fails
  after and did not before is a regression. Batch reports are matched case by
  case, by name; a case that now fails to analyse is a regression; added or
  removed strategies, runs and cases are listed, not regressions.

\b
Examples:
  einsum-analyze compare before.json after.json
  einsum-analyze compare before.json after.json --tolerance 0.10 --json -
  einsum-analyze compare before.json after.json --times seconds

\b
Exit codes:
  0  no figure regressed
  1  a figure regressed
  2  a file is unreadable or not a report of a schema version this tool reads
     (1 or 2; version 1 is mapped to 2), or one is a single report and the
     other a batch
"""



@click.command(
    name="compare",
    cls=OneLineErrors,
    epilog=_COMPARE_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("before", metavar="BEFORE.json")
@click.argument("after", metavar="AFTER.json")
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=0.05,
    show_default=True,
    help="Relative tolerance for timings (0.05: 5 %), on their ratios or their seconds. "
    "FLOPs and modelled memory are exact.",
)
@click.option(
    "--times",
    type=click.Choice(TIME_RULES),
    default="ratio",
    show_default=True,
    help="How to compare the runs' times: ratio (each over the torch baseline's in the "
    "same report, which cancels a change of load between the two runs) or seconds.",
)
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    help="Write the comparison as JSON to PATH; '-' writes only JSON to stdout.",
)
def compare_cli(before: str, after: str, tolerance: float, times: TimeRule,
                json_path: str | None) -> int:
    """Compare two reports, before and after a change, and say what changed.

    BEFORE.json and AFTER.json are reports written by --json: both single reports, or
    both batch reports from --cases (cases are matched by name). Exit code 1 when a
    figure regressed.
    """
    try:
        return _compare(before, after, tolerance, times, json_path)
    except EinsumAnalyzeError as err:
        raise InputError(str(err)) from err


def _compare(before: str, after: str, tolerance: float, times: TimeRule,
             json_path: str | None) -> int:
    from ..render.terminal import check_json_path
    from ..report.compare import compare_reports

    check_json_path(json_path)
    comparison = compare_reports(
        read_report(before, "BEFORE"), read_report(after, "AFTER"), tolerance=tolerance,
        times=times, names=(f"BEFORE {before!r}", f"AFTER {after!r}"),
    )
    if json_path is not None:
        write_json(comparison.to_dict(), json_path)
    from ..render.report import regression_lines

    if json_path != "-":

        from ..render.report import render_comparison

        render_comparison(comparison, console())
    for line in regression_lines(comparison):
        click.echo(line, err=True)
    return 1 if comparison.has_regressions else 0


def _check_plottable(document: Any, path: str) -> None:
    """Refuse a report the pictures cannot be drawn from, as ``compare`` refuses one.

    The document must be a report or a batch of a readable version whose compared
    figures are numbers (:mod:`einsum_analyze.report.saved`), of this version (the
    pictures need its timelines and tree), and its picture data must read back
    (:func:`einsum_analyze.plots.case_figures` reads JSON data only, so a missing key or
    a value of the wrong type there is the document's fault).
    """
    from ..plots import case_figures
    from ..report.saved import check_figures, document_kind

    name = repr(path)
    document_kind(document, name)
    check_figures(document, name)
    version = document.get("schema_version")
    if version != 2 or ("cases" not in document
                        and "tree" not in document.get("forward", {})):
        raise InputError(
            f"{name} has schema_version {version!r} without the timelines and the "
            "tree pictures need; write it again with this version of einsum-analyze"
        )
    try:
        case_figures(document)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        detail = f"key {err.args[0]!r} is missing" if isinstance(err, KeyError) else str(err)
        raise InputError(f"{name} is corrupted: the pictures cannot read it "
                         f"({detail})") from err


def read_report(path: str, which: str) -> Any:
    """The JSON document at ``path``; ``which`` names it in the one-line error."""
    import json

    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except OSError as err:
        raise InputError(f"cannot read {which} report {path!r}: {err.strerror}") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{which} report {path!r} is not JSON: {err}") from err
    except RecursionError as err:
        raise InputError(f"{which} report {path!r} is JSON nested too deeply to read") from err
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise InputError(f"{which} report {path!r} is not readable JSON: "
                         f"{str(err).splitlines()[0]}") from err


def write_plot(document: Any, plot_path: str) -> None:
    """Draw a report's pictures to ``plot_path`` and say where each file went."""
    from ..plots import write_plot as draw

    for path in draw(document, plot_path):
        click.echo(f"plot written to {path}", err=True)


@click.command(
    name="plot",
    cls=OneLineErrors,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="""\b
Examples:
  einsum-analyze plot report.json -o report.html
  einsum-analyze plot batch.json -o cases.pdf

\b
Exit codes:
  0  the plot was written
  2  the report is unreadable, matplotlib is missing, or the path's extension is not
     .png, .svg, .pdf or .html
""",
)
@click.argument("report", metavar="REPORT.json")
@click.option("-o", "--output", "output", metavar="PATH", required=True,
              help="Where to draw: .png, .svg, .pdf or .html. A batch report gives a PDF "
              "page or an HTML section per case, or one PNG/SVG per case (PATH-CASE.png).")
def plot_cli(report: str, output: str) -> int:
    """Draw a saved report (written by --json): memory timelines, tree, trade-off, runs.

    The pictures are those --plot draws during the analysis, from the report alone.
    """
    try:
        from ..plots import check_plot_path

        check_plot_path(output)
        document = read_report(report, "the")
        _check_plottable(document, report)
        write_plot(document, output)
        return 0
    except EinsumAnalyzeError as err:
        raise InputError(str(err)) from err

