"""The batch command line: ``--cases FILE`` analyses, runs and reports every case."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from ..render.terminal import console, progress, write_json
from .base import InputError
from .counts import check_counts
from .devices import runs_on_cpu
from .options import RunOptions, Settings, echo_budget_failures, execute_runs
from .roofline import add_roofline
from .verbs import write_plot

if TYPE_CHECKING:
    from ..report.budgets import Budgets
    from ..report.report import Report

__all__ = ["analyze_cases"]


def analyze_cases(
    cases_path: str,
    settings: Settings,
    run: RunOptions,
    json_path: str | None,
    budgets: Budgets,
    plot_path: str | None = None,
) -> int:
    """Run a cases file; exit 2 if any case failed, else 1 if any budget, else 0."""
    from ..analysis import analyze_case, run_cases
    from ..report.cases import Case, CaseDefaults, cases_format, parse_cases

    fmt = cases_format(cases_path)
    try:
        with open(cases_path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as err:
        raise InputError(f"cannot read the cases file {cases_path!r}: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise InputError(f"the cases file {cases_path!r} is not UTF-8 text") from err
    defaults = CaseDefaults(dtype=settings.dtype, optimize=settings.optimize,
                            memory_limit=settings.memory_limit, grad=settings.grad,
                            strategies=settings.strategies, budgets=budgets,
                            budget=settings.budget, objective=settings.objective,
                            max_search_s=settings.max_search_s)
    entries = parse_cases(text, fmt, defaults)
    devices = run.device_list()
    if run.profile_steps and devices == () and not any(
            entry.case is not None and entry.case.options.devices for entry in entries):
        raise click.UsageError("--profile-steps times runs; drop --device none")

    runnable = [entry for entry in entries if entry.case is not None]
    with progress(show=json_path != "-") as shown:
        shown.cases(len(runnable))

        def run_case(case: Case) -> Report:
            shown.next_case(case.name)
            report = add_roofline(analyze_case(case), settings.roofline)
            case_devices = _case_devices(case, devices)
            if case_devices == () or not report.strategies:
                return report
            case_run = _case_run(case, run)
            check_counts(case_run.repeats, case_run.warmup, force=run.force, report=report,
                         on_cpu=runs_on_cpu(case_devices), where="repeats and warmup")
            return execute_runs(report, case_run, case_devices, shown)

        batch = run_cases(entries, runner=run_case)
    if json_path is not None:
        write_json(batch.to_dict(), json_path)
    if plot_path is not None:
        write_plot(batch.to_dict(), plot_path)
    if json_path != "-":

        from ..render.report import render_batch

        render_batch(batch, console())
    for outcome in batch.cases:
        if outcome.report is None:
            click.echo(_case_error_line(outcome.name, outcome.error or ""), err=True)
        else:
            echo_budget_failures(outcome.report, outcome.name)
    if batch.has_errors:
        return 2
    return 1 if batch.has_budget_failures else 0


def _case_error_line(name: str, error: str) -> str:
    """``Error: case 'NAME': ...``, naming the case once even when the message names it."""
    prefix = f"case {name!r}"
    rest = error[len(prefix):].lstrip(": ") if error.startswith(prefix) else error
    return f"Error: {prefix}: {rest}"

def _case_devices(case: Any, devices: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """A case's own ``device`` (text or a list), else the command line's."""
    own = case.options.devices
    if own is None:
        return devices
    return RunOptions(own, "torch", 1, 0, 0, None, False).device_list()


def _case_run(case: Any, run: RunOptions) -> RunOptions:
    """The command line's run options with a case's own ``repeats`` and ``warmup``."""
    options = case.options
    return replace(run, repeats=options.repeats if options.repeats is not None else run.repeats,
                   warmup=options.warmup if options.warmup is not None else run.warmup)

