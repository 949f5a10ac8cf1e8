"""The command line: parse options, call the core, pick a renderer, map errors to exit codes.

Exit codes: 0 success; 1 a budget the user set was exceeded; 2 bad input, bad usage, or an
unavailable device or backend. A crash is a bug and shows its traceback.
"""

from __future__ import annotations

import sys
from typing import Any, get_args

import click

from . import __version__
from ._types import DType
from .errors import EinsumAnalyzeError
from .planning import OPTIMIZERS
from .strategies import STRATEGIES

__all__ = ["cli", "main"]

_EPILOG = """\b
Examples:
  einsum-analyze "bc,bd,cm,mdn->bn" --shapes 512x2,512x2,2x7,7x2x7
  einsum-analyze "ij,jk->ik" --sizes i=1024,j=512,k=256 --optimize optimal
  einsum-analyze "...ij,...jk" --shapes '[[8,1,32,64],[1,4,64,16]]' --json -
  einsum-analyze "abc,ai,bj,ck->ijk" --sizes a=256,b=256,c=256,i=128,j=128,k=128 \\
      --memory-limit 64MiB --dtype float64 --json report.json

\b
Exit codes:
  0  success
  1  a budget the user set was exceeded
  2  bad input, bad usage, or an unavailable device or backend
"""


class InputError(click.ClickException):
    """A user-fixable problem: printed as one line on stderr, exit code 2."""

    exit_code = 2


class _OneLineErrors(click.Command):
    """A command whose usage and input errors print one line, ``Error: ...``, and exit 2."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            result = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as err:
            click.echo(f"Error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.command(
    name="einsum-analyze",
    cls=_OneLineErrors,
    epilog=_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("equation")
@click.option(
    "--shapes",
    metavar="SHAPES",
    help="Operand shapes: one AxBxC item per operand, () for a scalar (512x2,2x7,()), "
    "or JSON ([[512,2],[2,7],[]]).",
)
@click.option(
    "--sizes",
    metavar="SIZES",
    help="Size of every index instead of --shapes: b=512,c=2,...",
)
@click.option(
    "--optimize",
    type=click.Choice(OPTIMIZERS, case_sensitive=False),
    default="auto",
    show_default=True,
    help="opt_einsum path optimizer.",
)
@click.option(
    "--memory-limit",
    metavar="LIMIT",
    help="Largest intermediate the planner may create: elements (opt_einsum's meaning), "
    "max_input, or bytes with a unit (512MiB, 2GB; converted with --dtype).",
)
@click.option(
    "--dtype",
    type=click.Choice(get_args(DType)),
    default="float32",
    show_default=True,
    help="Element type for byte figures.",
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
    help="Backward strategies to model, comma-separated: reverse, independent, "
    "torch-autograd; 'none' for forward only.",
)
@click.option(
    "--device",
    default="none",
    show_default=True,
    help="Where to run: none (analysis only).",
)
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    help="Write the JSON report to PATH; '-' writes only JSON to stdout.",
)
@click.version_option(__version__, "-V", "--version", prog_name="einsum-analyze")
def cli(
    equation: str,
    shapes: str | None,
    sizes: str | None,
    optimize: str,
    memory_limit: str | None,
    dtype: str,
    grad: str,
    strategies: str,
    device: str,
    json_path: str | None,
) -> None:
    """Analyse the cost of an einsum's forward and backward passes.

    EQUATION is an einsum as numpy and torch accept it (explicit or implicit output,
    '...', repeated indices). Give operand sizes with --shapes or --sizes. The report
    gives the forward path with FLOPs and peak memory, every operand's gradient
    contraction, and each backward strategy's FLOPs, retained bytes and training peak.
    """
    try:
        _analyze(
            equation,
            shapes,
            sizes,
            optimize,
            memory_limit,
            dtype,
            grad,
            strategies,
            device,
            json_path,
        )
    except EinsumAnalyzeError as err:
        raise InputError(str(err)) from err


def _analyze(
    equation: str,
    shapes: str | None,
    sizes: str | None,
    optimize: str,
    memory_limit: str | None,
    dtype: str,
    grad: str,
    strategies: str,
    device: str,
    json_path: str | None,
) -> None:
    from .analysis import analyze
    from .parsing import parse_shapes, parse_sizes
    from .report import dump_json

    if (shapes is None) == (sizes is None):
        raise click.UsageError("give exactly one of --shapes and --sizes")
    if device.strip().lower() != "none":
        raise InputError(f"--device {device!r} is not available yet; use --device none")
    report = analyze(
        equation,
        parse_shapes(shapes) if shapes is not None else None,
        sizes=parse_sizes(sizes) if sizes is not None else None,
        optimize=optimize,
        memory_limit=memory_limit,
        dtype=dtype,
        grad=grad,
        strategies=_split_names(strategies),
    )
    data = report.to_dict()
    if json_path == "-":
        dump_json(data, sys.stdout)
        return
    if json_path is not None:
        try:
            with open(json_path, "w", encoding="utf-8") as stream:
                dump_json(data, stream)
        except OSError as err:
            raise InputError(f"cannot write the JSON report to {json_path!r}: {err.strerror}")
    from rich.console import Console

    from .render import render_report

    render_report(report, Console())


def _split_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip().lower() for name in text.split(",") if name.strip())
    return () if names in ((), ("none",)) else names


def main() -> None:
    """Console-script entry point."""
    cli()
