"""The command line: options in, the core called, a renderer picked, errors to exit codes.

:mod:`.command` is ``einsum-analyze EQUATION --shapes ...`` and declares its options;
:mod:`.roofline` holds the ``--roofline`` and ``--profile-steps`` option group,
:mod:`.options` the settings a single equation and a cases file share and the runs they
ask for, :mod:`.devices` the checks and the run of ``--devices``, and :mod:`.cases` the
``--cases FILE`` batch; :mod:`.verbs` holds the ``compare`` and ``plot`` verbs, and
:mod:`.base` the one-line errors and exit codes every command shares. It is the only
package that imports click or chooses an exit code; where its output goes (console width,
pipes, JSON files) is :mod:`einsum_analyze.render.terminal`'s.

It is the top layer: it may import the layers docs/architecture.md lists for it, and no
part of the package imports it.
"""

from __future__ import annotations

from .command import cli, compare_cli, main, plot_cli

__all__ = ["cli", "compare_cli", "main", "plot_cli"]
