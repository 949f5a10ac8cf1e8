"""The options a single equation and a cases file share, and running a report with them.

:class:`Settings` holds the analysis options, :class:`RunOptions` the run options (checked
before any analysis); :func:`execute_runs` runs a report under them, and
:func:`echo_budget_failures` prints its exceeded budgets and gives the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import click

from .base import InputError

if TYPE_CHECKING:
    from ..distributed import DeviceList
    from ..render.terminal import RunProgress
    from ..report.report import Report
    from ..roofline import DeviceProfile

__all__ = ["RunOptions", "Settings", "echo_budget_failures", "execute_runs"]


@dataclass(frozen=True)
class Settings:
    """The analysis options a single equation and a cases file share."""

    optimize: str
    memory_limit: str | None
    dtype: str
    grad: str
    strategies: tuple[str, ...]
    budget: str | None = None
    objective: str | None = None
    cotengra: bool = False
    max_search_s: float = 1.0
    roofline: DeviceProfile | None = None


@dataclass(frozen=True)
class RunOptions:
    """The run options a single equation and a cases file share."""

    devices: tuple[str, ...]
    backend: str
    repeats: int
    warmup: int
    seed: int
    max_memory: str | None
    force: bool
    profile_steps: bool = False
    precision: str = "highest"
    spread: DeviceList | None = None

    def check(self, dtype: str) -> None:
        """Refuse what can never run at once, before any analysis, even with --device none."""
        from ..backends import get_backend
        from ..model.parsing import parse_bytes

        if self.max_memory is not None:
            try:
                parse_bytes(self.max_memory)
            except ValueError as err:
                raise InputError(f"--max-memory: {err}") from err
        why_not = get_backend(self.backend).unavailable("cpu", dtype)
        if why_not is not None:  # a dtype the backend has on no device
            raise InputError(f"--backend {self.backend} with --dtype {dtype}: {why_not}")

    def device_list(self) -> tuple[str, ...] | None:
        """() for analysis only, None for the default devices, else the names."""
        names = tuple(
            name.strip() for text in self.devices for name in text.split(",") if name.strip()
        )
        if not names and self.spread is not None:
            return ()  # --devices alone: only the distributed run
        if not names or names == ("auto",):
            return None
        if any(name.lower() == "none" for name in names):
            if len(names) > 1:
                raise click.UsageError("--device none cannot be combined with other devices")
            if self.spread is not None:
                raise click.UsageError("--device none runs nothing but --devices runs the "
                                       "sliced plan: drop --device none")
            if self.precision == "tf32":
                raise click.UsageError("--precision tf32 sets how runs compute and --device "
                                       "none runs nothing: drop one of them")
            return ()
        return names


def execute_runs(report: Report, run: RunOptions, devices: tuple[str, ...] | None,
                 progress: RunProgress) -> Report:
    """``report`` with its runs on ``devices`` under ``run``, and the precision it ran at."""
    from ..backends.precision import describe_precision, precision_context
    from ..execution import execute

    if not report.strategies:
        raise click.UsageError(
            "running needs at least one --strategy; drop --device or use --device none"
        )
    try:
        with precision_context(run.precision):
            report = execute(report, devices=devices, backend=run.backend,
                             repeats=run.repeats, warmup=run.warmup, seed=run.seed,
                             max_memory=run.max_memory, force=run.force,
                             on_progress=progress.run, on_run=progress.run_done,
                             profile_steps=run.profile_steps)
        precision = describe_precision(run.precision, report.dtype)
        return replace(report, environment={**report.environment, "precision": precision})
    finally:
        progress.finish_runs()


def echo_budget_failures(report: Report, case: str | None = None) -> int:
    """Print one stderr line per exceeded budget; the exit code (1 if any, else 0)."""
    from ..render.report import budget_failure_lines

    lines = budget_failure_lines(report.budgets, case)
    for line in lines:
        click.echo(line, err=True)
    return 1 if lines else 0

