"""The command line: options in, the core called, a renderer picked, errors to exit codes.

:mod:`.command` is ``einsum-analyze EQUATION --shapes ...``; its option groups live in
:mod:`.options` (runs), :mod:`.roofline` (``--roofline``, ``--profile-steps``),
:mod:`.devices` (``--devices``) and :mod:`.cases` (``--cases FILE``); :mod:`.verbs` holds
the ``compare`` and ``plot`` verbs, and :mod:`.base` the one-line errors and exit codes
every command shares. Only this package touches click, stdout, stderr and exit codes.

It is the top layer: it may import any part of the package, and no part imports it.
"""

from __future__ import annotations

from .command import cli, compare_cli, main, plot_cli

__all__ = ["cli", "compare_cli", "main", "plot_cli"]
