"""What every command of the CLI shares: one-line errors and their exit codes.

:class:`InputError` is a user-fixable problem (exit 2); :class:`OneLineErrors` is the
click command class that prints usage and input errors as one ``Error: ...`` line.
"""

from __future__ import annotations

import errno
import sys
from typing import Any

import click

from ..render.terminal import quiet_closed_pipe

__all__ = ["InputError", "OneLineErrors", "import_planner"]

_FULL_OUTPUT = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""Errors of a write to stdout that has no room (``> /dev/full``, ``ulimit -f``): every
file the command writes itself is wrapped in a one-line error where it is written, so
these reach the command's boundary only from stdout."""


def import_planner() -> None:
    """Import opt_einsum without numpy, unless either is imported already.

    opt_einsum imports numpy when it is imported only to fill its table of numpy's
    functions for arrays; without numpy it looks them up when first asked
    (``opt_einsum.backends.dispatch``). The analysis plans from shapes and never asks,
    and numpy's import was a third of the analysis-only command's cold start (about
    90 ms of 320, ``benchmarks/analysis_cold.py``). numpy imports as usual afterwards:
    a run on a device (torch imports it) or a search that seeds it. An opt_einsum that
    imports numpy unconditionally (3.3) is left to import as usual.
    """
    if "opt_einsum" in sys.modules or "numpy" in sys.modules:
        return
    sys.modules["numpy"] = None  # type: ignore[assignment]  # import numpy now fails
    try:
        import opt_einsum  # noqa: F401
        from opt_einsum.backends import dispatch

        # its object backend's tensordot and transpose are numpy's, found only in the
        # table numpy's import fills: where they are not there, numpy's when asked
        if ("tensordot", "object") not in getattr(dispatch, "_cached_funcs", {}):
            getattr(dispatch, "_aliases", {}).setdefault("object", "numpy")
    except ImportError:  # an opt_einsum that needs numpy (3.3): imported later, with it
        for name in [name for name in sys.modules if name.partition(".")[0] == "opt_einsum"]:
            del sys.modules[name]
    finally:
        del sys.modules["numpy"]


class InputError(click.ClickException):
    """A user-fixable problem: printed as one line on stderr, exit code 2."""

    exit_code = 2


class OneLineErrors(click.Command):
    """A command whose usage and input errors print one line, ``Error: ...``, and exit 2."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Run the command; in standalone mode, map its errors to one line and an exit code."""
        run = super().main
        if not standalone_mode:
            return run(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        try:
            result = run(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
            sys.stdout.flush()
        except click.ClickException as err:
            click.echo(f"Error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(130)
        except BrokenPipeError:  # the reader closed stdout: not a failure
            quiet_closed_pipe()
            sys.exit(0)
        except OSError as err:
            if err.errno not in _FULL_OUTPUT:
                raise  # not a write to a full output: a bug, with its traceback
            quiet_closed_pipe()  # drop what stdout still buffers
            click.echo(f"Error: cannot write the output: {err.strerror} "
                       f"({errno.errorcode.get(err.errno or 0, err.errno)})", err=True)
            sys.exit(2)
        sys.exit(result if isinstance(result, int) else 0)

