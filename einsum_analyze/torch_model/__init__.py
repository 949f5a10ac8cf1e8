"""What torch.einsum and autograd do, modelled from labels and sizes alone (no torch).

:mod:`.forward` follows torch.einsum's own execution: the path it asks opt_einsum for,
the permutes, reshapes and ``bmm`` of each pair, and the tensors autograd keeps;
:mod:`.backward` follows autograd's engine through those nodes; :mod:`.layout` holds
ATen's rules on sizes and strides (which reshapes copy, how a result lies). The
``torch-autograd`` strategy (:mod:`einsum_analyze.strategies.torch_autograd`) turns it
into a schedule, so that torch's own training step is modelled like ours.

It may import :mod:`einsum_analyze.model` and the errors, nothing above them.
"""
