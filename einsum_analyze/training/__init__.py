"""Training with torch: the drop-in einsum's autograd node, its plans, and capture().

Calls go one way: :mod:`einsum_analyze.torch` (the public drop-in) looks the plan up in
:mod:`.plans` (a plan compiled for the torch executor, in a bounded cache) and hands it
to :mod:`.node` (the autograd function, or under a tracer the custom op, that runs one
planned einsum and finds its plan in :mod:`.plans` itself); on a miss :mod:`.plans` calls
:mod:`.choice` (which strategy to run, from the analysis) and the torch backend.
:mod:`.capture` records a model's torch.einsum calls and analyses them.

It may import the analysis entry point, the strategies, the backends and everything
below them; nothing in the analysis imports it. :mod:`.choice` and :mod:`.capture`
import no torch at module level; :mod:`.plans` and :mod:`.node` do.
"""
