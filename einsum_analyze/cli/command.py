"""The command line: parse options, call the core, pick a renderer, map errors to exit codes.

Three verbs: ``einsum-analyze EQUATION ...`` (or ``--cases FILE``) analyses; ``einsum-analyze
compare BEFORE AFTER`` compares two saved reports; ``einsum-analyze plot REPORT -o PATH``
draws a saved report. :class:`_AnalyzeCommand` routes a first argument ``compare`` to
:data:`compare_cli` and ``plot`` to :data:`plot_cli`, so ``cli`` serves all three.

Exit codes: 0 success; 1 a budget the user set was exceeded (or, for compare, a figure
regressed); 2 bad input, bad usage, or an unavailable device or backend. A crash is a bug
and shows its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_args

import click

from .._version import __version__
from ..backends import backend_help, backend_names
from ..backends.precision import PRECISIONS, precision_dtype, precision_line
from ..errors import EinsumAnalyzeError
from ..model.parsing import parse_seconds, parse_shapes, parse_sizes, parse_strategy_names
from ..model.planning import OPTIMIZERS
from ..model.types import DType
from ..render.formatting import format_seconds
from ..render.terminal import check_json_path, console, progress, write_json
from ..report.budgets import check_budget_strategy
from ..strategies import STRATEGIES, get_strategy, strategy_names
from .base import InputError, OneLineErrors, import_planner
from .counts import check_counts
from .devices import DEVICES_HELP, check_devices, check_run_devices, run_devices, runs_on_cpu
from .options import RunOptions, Settings, echo_budget_failures, execute_runs
from .roofline import add_roofline, read_profile, roofline_options, search_profile
from .verbs import compare_cli, plot_cli, write_plot

if TYPE_CHECKING:
    from ..report.budgets import Budgets
    from ..report.report import Report

__all__ = ["cli", "compare_cli", "main", "plot_cli"]

_EPILOG = """\b
Examples:
  einsum-analyze "bc,bd,cm,mdn->bn" --shapes 512x2,512x2,2x7,7x2x7
  einsum-analyze "ij,jk->ik" --sizes i=1024,j=512,k=256 --optimize optimal
  einsum-analyze "...ij,...jk" --shapes '[[8,1,32,64],[1,4,64,16]]' --json -
  einsum-analyze "abc,ai,bj,ck->ijk" --sizes a=256,b=256,c=256,i=128,j=128,k=128 \\
      --memory-limit 64MiB --dtype float64 --json report.json

\b
CI mode (docs/ci.md):
  einsum-analyze "ij,jk->ik" --sizes i=1024,j=512,k=256 --device none \\
      --max-flops 3e8 --max-peak 8MiB
  einsum-analyze --cases cases.toml --device none --json report.json
  einsum-analyze compare before.json after.json --tolerance 0.05

\b
Pictures (the plot extra, matplotlib; docs/cli.md):
  einsum-analyze "ij,jk,kl->il" --sizes i=64,j=64,k=64,l=64 --plot report.html
  einsum-analyze plot report.json -o timeline.png

\b
Budgets are checked against the first strategy in --strategy (reverse by
default), or --budget-strategy NAME|all; --max-peak checks the forward peak
when no strategy is modelled; --max-time checks every run's median forward +
backward seconds (it passes when nothing ran). A cases file holds [[cases]]
with name, equation, shapes or sizes, and optional dtype, optimize,
memory_limit (one or a list), grad, strategy, budget, objective and a budgets
table; command-line options are
the defaults. 'einsum-analyze compare --help' explains comparison.

\b
Exit codes:
  0  success
  1  a budget the user set was exceeded (compare: a figure regressed)
  2  bad input, bad usage, or an unavailable device or backend (--cases: a case
     that could not be analysed; the other cases still run and are reported)
"""

class _AnalyzeCommand(OneLineErrors):
    """The analysis command; a first argument ``compare`` runs :data:`compare_cli` instead.

    The analysis command takes a positional EQUATION, so a click group cannot hold both
    verbs; ``einsum-analyze -- compare`` analyses an equation spelled ``compare``.
    """

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **kwargs: Any
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if argv[:1] == ["compare"]:
            name = f"{prog_name or self.name} compare"
            return compare_cli.main(argv[1:], prog_name=name, **kwargs)
        if argv[:1] == ["plot"]:
            name = f"{prog_name or self.name} plot"
            return plot_cli.main(argv[1:], prog_name=name, **kwargs)
        return super().main(self._arrow_equation_last(argv), prog_name, **kwargs)

    def _arrow_equation_last(self, argv: list[str]) -> list[str]:
        """Let an equation that starts with '->' (a scalar einsum) through without '--'.

        click reads ``"->"`` as an option; the first argument that starts with ``->``
        and is not an option's value moves after a ``--``, where click reads it as
        EQUATION. Arguments after a ``--`` the user wrote are left as they are.
        """
        takes_value = {
            name
            for param in self.params
            if isinstance(param, click.Option) and not param.is_flag and not param.count
            for name in param.opts
        }
        skip = False
        for position, arg in enumerate(argv):
            if skip:
                skip = False
            elif arg == "--":
                break
            elif arg in takes_value:
                skip = True
            elif arg.startswith("->"):
                return [*argv[:position], *argv[position + 1 :], "--", arg]
        return argv


@click.command(
    name="einsum-analyze",
    cls=_AnalyzeCommand,
    epilog=_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("equation", required=False)
@click.option(
    "--shapes",
    metavar="SHAPES",
    help="Operand shapes: one AxBxC item per operand, () for a scalar (512x2,2x7,()), "
    "or JSON ([[512,2],[2,7],[]]).",
)
@click.option(
    "--sizes",
    metavar="SIZES",
    help="The size of every index, instead of --shapes: b=512,c=2,...",
)
@click.option(
    "--optimize",
    type=click.Choice(OPTIMIZERS, case_sensitive=False),
    default="auto",
    show_default=True,
    help="The opt_einsum optimizer that plans the forward path.",
)
@click.option(
    "--max-search-time",
    metavar="SECONDS",
    default="1",
    show_default=True,
    help="Stop a path search after this long (1, 2.5, 500ms): branch-* keeps the best path "
    "found so far, the others fall back to greedy, and a warning says so. Searches that "
    "grow exponentially with the operands are announced on stderr before they start. "
    "The training search of --budget or --objective, its sliced fallback included, ends "
    "within it too, with the best plan it has found.",
)
@click.option(
    "--memory-limit",
    metavar="LIMIT",
    help="Largest intermediate the planner may create: elements (opt_einsum's meaning), "
    "max_input, or bytes with a unit (512MiB, 2GB; converted with --dtype). A comma list "
    "(none,1e6,64KiB,max_input) compares the limits: one table row per limit, each with "
    "its forward path, strategies and best plan.",
)
@click.option(
    "--budget",
    metavar="BYTES",
    help="Training budget: the peak of a training step, counting everything live on the "
    "device, inputs included (40GiB). Each strategy says whether it fits, and a plan is "
    "recommended within it. When no plan fits, the smallest reachable peak is printed "
    "and the exit code is 1.",
)
@click.option(
    "--objective",
    metavar="NAME",
    help="Search paths and strategies for the training step and recommend a plan: "
    "time (the time model's predicted seconds on --roofline's profile, the device that "
    "runs, or the nominal cpu; torch.einsum's own execution competes), flops (forward + "
    "backward + recompute), memory (training peak) or balanced (FLOPs x peak). Default: "
    "time when --budget or a limit list is given, else no search.",
)
@click.option(
    "--cotengra/--no-cotengra",
    default=False,
    show_default=True,
    help="Add cotengra's hyper-optimizer to the search's candidates (the cotengra extra).",
)
@click.option(
    "--dtype",
    type=click.Choice(get_args(DType)),
    default="float32",
    show_default=True,
    help="The element type the byte figures count.",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="highest",
    show_default=True,
    help="How runs compute: float32 in full, tf32 (CUDA matrix products in TensorFloat-32), "
    "or bf16 / fp16 (every tensor in bfloat16 / float16). Gradient errors are against "
    "the float64 oracle.",
)
@click.option(
    "--grad",
    default="all",
    show_default=True,
    metavar="OPERANDS",
    help="Operands that need a gradient: all, none, or positions such as 0,3 or 9-17.",
)
@click.option(
    "--strategy",
    "strategies",
    default=",".join(STRATEGIES),
    show_default=True,
    metavar="NAMES",
    help="Backward strategies to model, comma-separated, or 'none' for forward only: "
    + "; ".join(f"{name}: {get_strategy(name).description}" for name in strategy_names())
    + ".",
)
@click.option(
    "--device",
    "devices",
    multiple=True,
    metavar="DEVICE",
    help="Where to run: auto, cpu, cuda, cuda:N, a comma-separated list, or none (analysis "
    "only, no torch import). Repeatable. Default: auto, CUDA where it is available and "
    "the cpu otherwise.",
)
@click.option("--devices", "devices_list", metavar="LIST", help=DEVICES_HELP)
@click.option(
    "--backend",
    type=click.Choice(backend_names()),
    default="torch",
    show_default=True,
    help=f"Executor for our strategies: {backend_help()}.",
)
@click.option("--repeats", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many timed blocks each phase (forward, backward) gets.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="How many untimed calls come before the timed ones.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="The seed of the random operands.")
@click.option(
    "--max-memory",
    metavar="BYTES",
    help="Skip runs whose predicted peak, inputs included, exceeds this (8GiB, 512MB, "
    "...); torch-autograd's and opt_einsum-torch's predicted peak get a 25% margin.",
)
@click.option("--force", is_flag=True,
              help="Run even when the predicted time is far beyond reason: a cpu run over "
              "120 s per training step, or counts (--repeats, --warmup) over an hour.")
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    help="Write the JSON report to PATH; '-' writes only JSON to stdout.",
)
@click.option(
    "--plot",
    "plot_path",
    metavar="PATH",
    help="Draw the report: memory timeline of every strategy, the contraction tree, the "
    "FLOPs/memory trade-off and the runs. The format follows the extension: .png, .svg, "
    ".pdf or .html (one self-contained page). Needs matplotlib (the plot extra).",
)
@click.option(
    "--cases",
    "cases_path",
    metavar="FILE",
    help="Analyse every case of a JSON or TOML cases file into one report holding a "
    "list, instead of EQUATION with --shapes or --sizes (docs/ci.md).",
)
@click.option("--max-flops", metavar="FLOPS",
              help="Budget: forward FLOPs (1e9, 2_000_000). Exceeded: exit code 1.")
@click.option("--max-backward-flops", metavar="FLOPS",
              help="Budget: backward FLOPs of the budget strategy.")
@click.option("--max-peak", metavar="BYTES",
              help="Budget: training peak of the budget strategy, or the forward peak "
              "when no strategy is modelled; inputs included (512MiB, 2GB).")
@click.option("--max-retained", metavar="BYTES",
              help="Budget: bytes the budget strategy retains for backward.")
@click.option("--max-time", metavar="SECONDS",
              help="Budget: median forward + backward seconds of every run (0.5, 250ms).")
@click.option(
    "--budget-strategy",
    type=click.Choice(("all", *strategy_names()), case_sensitive=False),
    help="Strategy the backward budgets check: any strategy name, or all (each modelled "
    "strategy must pass). Default: the first in --strategy.",
)
@roofline_options
@click.version_option(__version__, "-V", "--version", prog_name="einsum-analyze")
def cli(
    equation: str | None,
    shapes: str | None,
    sizes: str | None,
    optimize: str,
    max_search_time: str,
    memory_limit: str | None,
    budget: str | None,
    objective: str | None,
    cotengra: bool,
    dtype: str,
    precision: str,
    grad: str,
    strategies: str,
    devices: tuple[str, ...],
    devices_list: str | None,
    backend: str,
    repeats: int,
    warmup: int,
    seed: int,
    max_memory: str | None,
    force: bool,
    json_path: str | None,
    plot_path: str | None,
    cases_path: str | None,
    max_flops: str | None,
    max_backward_flops: str | None,
    max_peak: str | None,
    max_retained: str | None,
    max_time: str | None,
    budget_strategy: str | None,
    roofline: str | None,
    profile_steps: bool,
) -> int:
    """Analyse the cost of an einsum's forward and backward passes.

    EQUATION is an einsum as numpy and torch accept it (explicit or implicit output,
    '...', repeated indices). Give operand sizes with --shapes or --sizes. The report
    gives the forward path with FLOPs and peak memory, every operand's gradient
    contraction, and each backward strategy's FLOPs, retained bytes and training peak.
    """
    try:
        budgets = _read_budgets(
            max_flops, max_backward_flops, max_peak, max_retained, max_time, budget_strategy
        )
        dtype = precision_dtype(precision, dtype)
        # Not given: STRATEGIES itself, the defaults for the equation's size.
        source = click.get_current_context().get_parameter_source("strategies")
        named = (STRATEGIES if source is click.core.ParameterSource.DEFAULT
                 else parse_strategy_names(strategies))
        settings = Settings(optimize, memory_limit, dtype, grad,
                             named, budget, objective, cotengra,
                              parse_seconds(max_search_time, "--max-search-time"),
                              read_profile(roofline))
        run = RunOptions(devices, backend, repeats, warmup, seed, max_memory, force,
                          profile_steps, precision, check_devices(devices_list))
        run.check(dtype)
        check_json_path(json_path)
        _check_plot_path(plot_path)
        if cases_path is None:
            check_budget_strategy(budgets, settings.strategies)
        check_run_devices(run.device_list(), backend, dtype)
        if run.device_list() != ():
            check_counts(repeats, warmup, force=force)
        if cases_path is not None:
            if equation is not None or shapes is not None or sizes is not None:
                raise click.UsageError("give either --cases or EQUATION with --shapes/--sizes")
            if devices_list is not None:
                raise click.UsageError("--devices runs one equation; it cannot go with --cases")
            from .cases import analyze_cases  # a cases file only: loaded when given

            return analyze_cases(cases_path, settings, run, json_path, budgets, plot_path)
        if devices_list is not None and "sliced" not in settings.strategies:
            raise click.UsageError("--devices runs the sliced strategy: add sliced to "
                                   "--strategy (with --budget to choose the slices)")
        if equation is None:
            raise click.UsageError("Missing argument 'EQUATION' (or give --cases FILE)")
        return _analyze(equation, shapes, sizes, settings, run, json_path, budgets, plot_path)
    except EinsumAnalyzeError as err:
        raise InputError(str(err)) from err


def _analyze(
    equation: str,
    shapes: str | None,
    sizes: str | None,
    settings: Settings,
    run: RunOptions,
    json_path: str | None,
    budgets: Budgets,
    plot_path: str | None = None,
) -> int:
    from ..analysis import analyze
    from ..report.budgets import apply_budgets

    if (shapes is None) == (sizes is None):
        raise click.UsageError("give exactly one of --shapes and --sizes")
    devices = run.device_list()
    if run.profile_steps and devices == ():
        raise click.UsageError("--profile-steps times runs; drop --device none")
    if devices and not settings.strategies:
        raise click.UsageError(
            "running needs at least one --strategy; drop --device or use --device none"
        )
    searches = (settings.objective is not None or settings.budget is not None
                or "," in (settings.memory_limit or ""))
    profile = search_profile(settings.roofline, devices, settings.dtype, searches)
    out = console() if json_path != "-" else None
    early = _EarlyTables(out, searches, settings.max_search_s)
    report = analyze(
        equation,
        parse_shapes(shapes) if shapes is not None else None,
        sizes=parse_sizes(sizes) if sizes is not None else None,
        optimize=settings.optimize,
        memory_limit=settings.memory_limit,
        dtype=settings.dtype,
        grad=settings.grad,
        strategies=settings.strategies,
        budget=settings.budget,
        objective=settings.objective,
        cotengra=settings.cotengra,
        max_search_s=settings.max_search_s,
        profile=profile,
        on_analysed=early.print_model,
        on_search=lambda notice: click.echo(
            f"note: {notice}; it stops after {format_seconds(settings.max_search_s)} "
            "(--max-search-time)",
            err=True,
        ),
    )
    early.done()
    report = add_roofline(report, settings.roofline)
    if devices != () and report.strategies:
        check_counts(run.repeats, run.warmup, force=run.force, report=report,
                     on_cpu=runs_on_cpu(devices))
    if out is not None:
        from ..render.report import render_analysis, render_search
        from ..render.roofline import render_roofline

        # At once: the runs may take a while (the tables before the search are out).
        (render_search if early.printed else render_analysis)(report, out)
        render_roofline(report, out)
    # Forward-only analysis (--strategy none) runs nothing unless a device was asked for.
    if devices != () and (report.strategies or devices is not None):
        with progress(show=out is not None) as shown:
            report = execute_runs(report, run, devices, shown)
    spread = None
    if run.spread is not None:
        spread = run_devices(report, run.spread, repeats=run.repeats, warmup=run.warmup,
                             seed=run.seed)
    report = apply_budgets(report, budgets)  # last: budgets read the strategies and runs
    document = report.to_dict()
    if spread is not None:
        document["distributed"] = spread.to_dict()
    if plot_path is not None:
        document.update(_measured_timelines(report))
    if json_path is not None:
        write_json(document, json_path)
    if plot_path is not None:
        write_plot(document, plot_path)
    if out is not None:
        from ..render.report import render_runs

        render_runs(report, out, console(stderr=True))
        if (line := precision_line(report.environment)) is not None:
            out.print(line, highlight=False)  # the runs' mode, else only in the JSON
        if run.profile_steps and report.runs:
            from ..render.roofline import render_step_times

            render_step_times(report, out)
        if spread is not None:
            from ..render.distributed import render_distributed  # --devices only

            render_distributed(spread, out, console(stderr=True))
    elif spread is not None and spread.failure is not None:
        click.echo(f"error: distributed run failed: {spread.failure}", err=True)
    if spread is not None and spread.failed:
        return 2
    return echo_budget_failures(report)


class _EarlyTables:
    """Print the analysis tables before the training search, and a line while it runs.

    The line goes to stderr, and only to a terminal; it is gone when the search ends.
    """

    def __init__(self, out: Any, searches: bool, seconds: float) -> None:
        self.out, self.searches, self.seconds = out, searches, seconds
        self.printed = False
        self._status: Any = None

    def print_model(self, report: Report) -> None:
        if self.out is None or not self.searches:
            return
        from ..render.report import render_model

        render_model(report, self.out)
        self.printed = True
        if sys.stderr.isatty():
            self._status = console(stderr=True).status(
                f"searching paths and strategies for the training step (at most "
                f"{format_seconds(self.seconds)}, --max-search-time)")
            self._status.start()

    def done(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _read_budgets(
    max_flops: str | None,
    max_backward_flops: str | None,
    max_peak: str | None,
    max_retained: str | None,
    max_time: str | None,
    budget_strategy: str | None,
) -> Budgets:
    from ..report.budgets import Budgets

    return Budgets.from_mapping({
        "max-flops": max_flops,
        "max-backward-flops": max_backward_flops,
        "max-peak": max_peak,
        "max-retained": max_retained,
        "max-time": max_time,
        "budget-strategy": budget_strategy,
    })


def _check_plot_path(plot_path: str | None) -> None:
    """Refuse a plot that cannot be drawn before any analysis: no matplotlib, a bad path."""
    if plot_path is None:
        return
    from ..plots import check_plot_path

    check_plot_path(plot_path)


def _measured_timelines(report: Report) -> dict[str, Any]:
    """With --plot after CUDA runs: the allocator's timeline of one run per strategy."""
    cuda = [run.device for run in report.runs
            if run.device.startswith("cuda") and run.skipped is None]
    if not cuda:
        return {}
    from ..runs.timeline import record_timelines

    return {"measured_timelines": record_timelines(report, cuda[0])}


def main() -> None:
    """Console-script entry point."""
    import_planner()
    cli()
