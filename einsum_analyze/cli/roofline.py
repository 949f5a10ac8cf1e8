"""The command line's roofline options: ``--roofline NAME|FILE.json`` and ``--profile-steps``.

:func:`roofline_options` adds both options to the analyse command; :func:`read_profile`
reads ``--roofline`` before anything is analysed (bad input: one line, exit 2, through
:class:`~einsum_analyze.errors.PlanningError`); :func:`add_roofline` gives a report its
roofline section. click is imported here, never by the analysis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..roofline.profiles import profile_names

if TYPE_CHECKING:
    from ..report.report import Report
    from ..roofline import DeviceProfile

__all__ = ["add_roofline", "read_profile", "roofline_options", "search_profile"]

F = TypeVar("F", bound=Callable[..., Any])


def roofline_options(command: F) -> F:
    """The two options, for the analyse command."""
    command = click.option(
        "--profile-steps",
        is_flag=True,
        help="Time every forward and backward step of our strategies' runs (CUDA events on "
        "a GPU, perf_counter with fences on the cpu): the costliest steps first, each with "
        "its share of the total and its efficiency against the calibrated roofline; the "
        "JSON report has every step (docs/roofline.md).",
    )(command)
    return click.option(
        "--roofline",
        "roofline",
        metavar="NAME|FILE.json",
        help="A device profile for each step's lower-bound time with --device none: "
        f"{', '.join(profile_names())} (NOMINAL datasheet figures) or a JSON file with "
        "bandwidth_bytes_per_s and flops_per_s (docs/roofline.md). A run calibrates its "
        "device instead, unless this is given.",
    )(command)


def read_profile(text: str | None) -> DeviceProfile | None:
    """The profile ``--roofline`` names, or None without the option."""
    if text is None:
        return None
    from ..roofline import load_profile

    return load_profile(text)


def search_profile(given: DeviceProfile | None, devices: tuple[str, ...] | None, dtype: str,
                   searches: bool) -> DeviceProfile | None:
    """The profile the search predicts time on (None: the search's nominal default).

    ``--roofline``'s, else, when a search runs before runs, the first device's
    calibration. ``devices``: ``()`` for analysis only, None for the default devices.
    """
    if given is not None or devices == () or not searches:
        return given
    from ..backends.calibration import calibrate
    from ..execution import resolve_devices

    return calibrate(resolve_devices(devices)[0], dtype).profile()


def add_roofline(report: Report, profile: DeviceProfile | None) -> Report:
    """The report with its roofline on ``profile`` (unchanged without a profile)."""
    if profile is None or not report.strategies:
        return report
    from ..roofline import with_roofline

    return with_roofline(report, profile)
