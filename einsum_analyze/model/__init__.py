"""The pure model of an einsum and its training step: labels and sizes, never arrays.

It holds the vocabulary (:mod:`.types`), the equation and its normalisation
(:mod:`.equation`), user text to values (:mod:`.parsing`), the forward path through
opt_einsum (:mod:`.planning`, its time limit in :mod:`.deadline`), each operand's gradient
contraction (:mod:`.gradients`), the records of a schedule (:mod:`.schedule`), its memory
replay (:mod:`.memory`), the kernels and layouts of each contraction (:mod:`.lowering`),
the data of the pictures (:mod:`.timeline`), what one analysis remembers while it runs
(:mod:`.memo`) and seconds and bytes as people read them (:mod:`.units`).

It is the bottom layer: it imports only :mod:`einsum_analyze.errors` and opt_einsum, never
torch, click, rich or matplotlib, and nothing else of the package (docs/architecture.md).
"""
