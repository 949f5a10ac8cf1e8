"""Terminal rendering: a report's data as rich tables and lines. Computes nothing.

:mod:`.report` renders a whole report (the analysis, then the runs); :mod:`.model`,
:mod:`.search`, :mod:`.measured`, :mod:`.roofline`, :mod:`.checks` and
:mod:`.distributed` render one part each, with the table helpers of :mod:`.layout`.
:mod:`.terminal` says where output goes (console width, progress, pipes, JSON files) and
:mod:`.formatting` writes figures as people read them (bytes, counts, seconds), for the
pictures and the runs' messages too.

It may import the report, the distributed run's result record and the layers below
them (docs/architecture.md), never the CLI or the runs. This ``__init__``
imports nothing, so that :mod:`.formatting` is had without rich.
"""
