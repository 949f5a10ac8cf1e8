"""Compile one contraction event into torch calls (:mod:`.torch_kernels` compiles the rest).

The kernels are those :mod:`einsum_analyze.model.lowering` chose: sums of private indices and
layout copies into temporaries, then one ``mm``/``bmm`` or ``mul`` into a fresh output.
Each input reaches its kernel through one :class:`.ViewChain`; reductions, copies and
products allocate their own contiguous result (as a fresh ``empty`` with ``out=`` would),
and the output is shown in the step's term by one view at most.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..model.lowering import InputPrep, Kernel
from ..model.memory import Event
from ..model.narrow import NARROW_ITEMSIZE, narrow_terms
from .relabel import ascii_equation
from .torch_views import ViewChain, arrange, contiguous_strides, diagonal_view, finish

__all__ = ["Live", "Op", "compile_contract"]

Live = dict[str, Any]
Op = Callable[[Live, list[Any]], dict[str, Any] | None]
"""One event: reads and updates the live tensors, appends its temporaries to the list,
and returns the kept copies that replace inputs (applied by the caller), if any."""


class _Input:
    """Compiled preparation of one contraction input.

    ``view`` (a :class:`.ViewChain`) takes the input to the tensor the kernel reads
    with ``labels``: its diagonal, without its size-1 axes; ``made`` tells whether a
    sum of private labels or a layout copy makes a buffer on the way (then ``view`` is
    the chain into that first buffer's source, ``reduce`` or ``copy`` follows).
    """

    def __init__(self, term: str, prep: InputPrep, sizes: Mapping[str, int]) -> None:
        distinct = "".join(dict.fromkeys(term))
        self.term = term
        self.drop = tuple(p for p, c in enumerate(distinct) if sizes[c] == 1)
        labels = "".join(c for c in distinct if sizes[c] != 1)
        self.reduce_perm: tuple[int, ...] = ()
        self.reduce_dims: tuple[int, ...] = ()
        self.keep_shape: tuple[int, ...] = ()
        if prep.reduce:
            self.reduce_perm = tuple(labels.index(c) for c in prep.keep + prep.reduce)
            self.reduce_dims = tuple(range(len(prep.keep), len(prep.keep) + len(prep.reduce)))
            self.keep_shape = tuple(sizes[c] for c in prep.keep)
            labels = "".join(prep.keep)
        self.copy_perm: tuple[int, ...] = ()
        self.copy_shape: tuple[int, ...] = ()
        if prep.copy:
            self.copy_perm = tuple(labels.index(c) for c in prep.copy)
            self.copy_shape = tuple(sizes[c] for c in prep.copy)
            labels = "".join(prep.copy)
        self.labels = labels
        self.memory_perm = tuple(labels.index(c) for c in prep.order)
        self.plain = len(distinct) == len(term) and not self.drop
        self.made = bool(self.reduce_perm or self.copy_perm)
        self.view = ViewChain(self._source_view)
        # A buffer the copy reads from (the reduced one) is fresh and contiguous.
        self.copy_view = ViewChain(lambda t: t.permute(self.copy_perm))

    def _source_view(self, tensor: Any) -> Any:
        view = tensor if self.plain else diagonal_view(tensor, self.term)
        for position in reversed(self.drop):
            view = view.squeeze(position)
        if self.reduce_perm:
            return view.permute(self.reduce_perm)
        if self.copy_perm:
            return view.permute(self.copy_perm)
        return view

    def then(self, chain: Callable[[Any], Any]) -> ViewChain:
        """The view ``chain`` after this preparation, as one chain when it makes no buffer.

        The chain returned reads the input itself when ``made`` is false, else the
        preparation's last buffer.
        """
        if self.made:
            return ViewChain(chain)
        source = self._source_view
        return ViewChain(lambda t: chain(source(t)))

    def __call__(self, tensor: Any, workspace: list[Any]) -> Any:
        """The prepared input: a view of ``tensor``, or the buffer made from it."""
        view = self.view(tensor)
        if not self.made:
            return view
        if self.reduce_perm:
            # A reduction allocates its result contiguous, as a fresh ``empty`` would be.
            buffer = _torch().sum(view, dim=self.reduce_dims)
            workspace.append(buffer)
            if not self.copy_perm:
                return buffer
            view = self.copy_view(buffer)
        buffer = view.clone(memory_format=_torch().contiguous_format)  # fresh, contiguous
        workspace.append(buffer)
        return buffer


def _torch() -> Any:
    import torch

    return torch


def compile_contract(event: Event, sizes: Mapping[str, int]) -> Op:
    """One contraction event as a function over the live tensors."""
    import torch

    lhs, _, out_term = event.equation.partition("->")
    terms = lhs.split(",")
    kernel = event.kernel
    names = event.inputs
    target = event.tensor
    view_term = event.view

    if kernel is None:
        # An event no lowering has seen (a schedule compiled as built): torch.einsum, whose
        # memory only a lowered schedule models.
        equation = ascii_equation(event.equation)

        def run_einsum(live: Live, workspace: list[Any]) -> None:
            inputs = [live[name] for name in names]
            result = torch.einsum(equation, *inputs).clone(memory_format=torch.contiguous_format)
            live[target] = finish(result, out_term, view_term, sizes)

        return run_einsum

    preps = [_Input(term, prep, sizes) for term, prep in zip(terms, kernel.inputs, strict=True)]
    out_labels = "".join(kernel.out_order)
    out_shape = tuple(sizes[c] for c in kernel.out_order)
    empty = torch.empty
    if kernel.kind == "bmm":
        return _compile_bmm(kernel, preps, names, target, out_labels, out_shape,
                            (out_term, view_term), sizes)
    present = _presenter(out_labels, out_shape, out_term, view_term, sizes, out_shape)

    match kernel.kind:
        case "reduce":
            (prep,) = preps
            dims = prep.reduce_dims
            (name,) = names
            source = prep.view  # the diagonal, squeezed and permuted for the sum
            total = torch.sum

            if prep.keep_shape == out_shape and dims:
                def run_sum(live: Live, workspace: list[Any]) -> None:
                    live[target] = present(total(source(live[name]), dim=dims))

                return run_sum

            def run_reduce(live: Live, workspace: list[Any]) -> None:
                view = source(live[name])
                out = empty(out_shape, dtype=view.dtype, device=view.device)
                total(view, dim=dims, out=out)
                live[target] = present(out)

            return run_reduce
        case "copy":
            (prep,) = preps
            (name,) = names
            perm = prep.memory_perm
            arranged = prep.then(lambda t: t.permute(perm))

            contiguous = torch.contiguous_format
            if tuple(sizes[c] for c in kernel.inputs[0].order) == out_shape:
                def run_clone(live: Live, workspace: list[Any]) -> None:
                    view = arranged(prep(live[name], workspace) if prep.made else live[name])
                    live[target] = present(view.clone(memory_format=contiguous))

                return run_clone

            def run_copy(live: Live, workspace: list[Any]) -> None:
                view = arranged(prep(live[name], workspace) if prep.made else live[name])
                out = empty(out_shape, dtype=view.dtype, device=view.device)
                out.copy_(view)
                live[target] = present(out)

            return run_copy
        case "mul":
            a_prep, b_prep = preps
            a_name, b_name = names
            a_view = a_prep.then(lambda t: arrange(t, a_prep.labels, out_labels))
            b_view = b_prep.then(lambda t: arrange(t, b_prep.labels, out_labels))
            multiply = torch.mul

            def run_mul(live: Live, workspace: list[Any]) -> None:
                a = a_view(a_prep(live[a_name], workspace) if a_prep.made else live[a_name])
                b = b_view(b_prep(live[b_name], workspace) if b_prep.made else live[b_name])
                out = a.new_empty(out_shape)  # a method: no dtype, device to parse
                multiply(a, b, out=out)
                live[target] = present(out)

            return run_mul
        case _:
            raise AssertionError(f"unknown kernel {kernel.kind!r}")


def _presenter(out_labels: str, out_shape: tuple[int, ...], out_term: str, view_term: str,
               sizes: Mapping[str, int], made: tuple[int, ...]) -> Callable[[Any], Any]:
    """The view of a fresh contiguous output in the step's term, as one ``as_strided``.

    ``made`` is the shape the kernel gives the output (its ``out_order`` in memory,
    perhaps flattened to a matrix). The view's sizes and strides are found once, on a
    meta tensor, by the same views (:func:`arrange`, :func:`finish`): one call per
    step instead of several, and none where the output is already in the step's term.
    """
    size, stride = _shown_layout(out_labels, out_shape, out_term, view_term, sizes)
    if size == made and stride == contiguous_strides(size):
        return _same
    return lambda buffer: buffer.as_strided(size, stride)


def _shown_layout(out_labels: str, out_shape: tuple[int, ...], out_term: str, view_term: str,
                  sizes: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Sizes and strides of a fresh contiguous output (labels ``out_labels``) in its term.

    Found on a meta tensor by the views :func:`arrange` and :func:`finish`.
    """
    import torch

    meta = torch.empty(out_shape, device="meta")
    shown = finish(arrange(meta, out_labels, out_term), out_term, view_term, sizes)
    return tuple(shown.shape), tuple(shown.stride())


def _same(buffer: Any) -> Any:
    return buffer


def _compile_bmm(
    kernel: Kernel, preps: Sequence[_Input], names: Sequence[str], target: str,
    out_labels: str, out_shape: tuple[int, ...], terms: tuple[str, str],
    sizes: Mapping[str, int],
) -> Op:
    """One ``mm`` (no batch) or ``bmm`` into a fresh contiguous output.

    Each input reaches the kernel through one :class:`.ViewChain` (its diagonal, the
    permutation into its memory order, the reshape into a matrix and the transpose the
    product reads); the kernel allocates its own output, contiguous, as ``out=`` on a
    fresh ``empty`` would.
    """
    import torch

    a_prep, b_prep = preps
    a_name, b_name = names
    nb = math.prod(sizes[c] for c in kernel.batch)
    nl = math.prod(sizes[c] for c in kernel.left)
    nk = math.prod(sizes[c] for c in kernel.contracted)
    nr = math.prod(sizes[c] for c in kernel.right)
    a_order = kernel.inputs[0].order
    b_order = kernel.inputs[1].order
    nbatch = len(kernel.batch)
    # A is (batch, left, contracted) or (batch, contracted, left) in memory.
    a_left_first = tuple(a_order[nbatch:nbatch + len(kernel.left)]) == kernel.left
    b_contracted_first = tuple(b_order[nbatch:nbatch + len(kernel.contracted)]) == kernel.contracted
    a_shape = (nb, nl, nk) if a_left_first else (nb, nk, nl)
    b_shape = (nb, nk, nr) if b_contracted_first else (nb, nr, nk)
    # The lowering may ask for the output as (batch, right, left): the transposed product.
    swapped = tuple(kernel.out_order) != kernel.batch + kernel.left + kernel.right
    flat = nb == 1  # no batch: a 2-D mm, one call less in torch than bmm
    made = (nr, nl) if swapped else (nl, nr)
    present = _presenter(out_labels, out_shape, *terms, sizes, made if flat else (nb, *made))

    def matrix(prep: _Input, shape: tuple[int, ...], transpose: bool) -> ViewChain:
        """The chain from a prepared input to the matrix the product reads."""
        perm = prep.memory_perm

        def chain(tensor: Any) -> Any:
            view = tensor.permute(perm).view(shape)
            if transpose:
                view = view.transpose(1, 2)
            return view[0] if flat else view

        return prep.then(chain)

    promoted = [(position, names[position], preps[position]) for position in kernel.promote]
    out_term, view_term = terms
    shown = _shown_transposed(kernel, preps, out_term, swapped) if (
        flat and not promoted and not view_term) else None
    if shown is not None:
        # The result in the step's term as a column-major matrix: the product written
        # into it (the same bytes, no view of the output, fewer of the inputs).
        swapped = not swapped
        size, stride = _shown_layout(out_labels, out_shape, out_term, view_term, sizes)
    # (batch, left, contracted) @ (batch, contracted, right), or the transposed product.
    a_view = matrix(a_prep, a_shape, (not a_left_first) != swapped)
    b_view = matrix(b_prep, b_shape, (not b_contracted_first) != swapped)
    product = torch.mm if flat else torch.bmm
    terms_added = narrow_terms(kernel, sizes)
    if terms_added:
        product = _multiply_adds(product, terms_added)
    a_made, b_made = a_prep.made, b_prep.made
    if shown is not None:
        flip = swapped
        into = product

        def run_mm_into(live: Live, workspace: list[Any]) -> None:
            # The first input is prepared first, whichever the product reads first, as
            # the memory model counts the buffers (and a sum's float32 temporaries).
            a = a_view(a_prep(live[a_name], workspace) if a_made else live[a_name])
            b = b_view(b_prep(live[b_name], workspace) if b_made else live[b_name])
            x, y = (b, a) if flip else (a, b)
            live[target] = into(x, y, out=x.new_empty_strided(size, stride))

        return run_mm_into
    if promoted:
        return _bmm_promoting(preps, names, target, present, a_view, b_view, swapped, product,
                              promoted)

    if not a_made and not b_made:
        def run_mm(live: Live, workspace: list[Any]) -> None:
            a = a_view(live[a_name])
            b = b_view(live[b_name])
            live[target] = present(product(b, a) if swapped else product(a, b))

        return run_mm

    def run_bmm(live: Live, workspace: list[Any]) -> None:
        a = a_view(a_prep(live[a_name], workspace) if a_made else live[a_name])
        b = b_view(b_prep(live[b_name], workspace) if b_made else live[b_name])
        live[target] = present(product(b, a) if swapped else product(a, b))

    return run_bmm


def _multiply_adds(product: Callable[..., Any], terms: int) -> Callable[..., Any]:
    """``product`` (``mm`` or ``bmm``) as ``terms`` broadcast multiply-adds into its output.

    For the narrow products of :mod:`einsum_analyze.model.narrow`: ``x @ y`` is the sum
    over ``j`` of ``x[..., j]`` (a column) times ``y[..., j, :]`` (a row), written into
    one fresh contiguous output (or ``out``), as the product allocates it. An element
    under :data:`.narrow.NARROW_ITEMSIZE` bytes runs the product itself.
    """
    import torch

    mul = torch.mul

    def run(x: Any, y: Any, out: Any = None) -> Any:
        if x.element_size() < NARROW_ITEMSIZE:
            return product(x, y) if out is None else product(x, y, out=out)
        if out is None:
            out = x.new_empty((*x.shape[:-1], y.shape[-1]))
        mul(x[..., 0:1], y[..., 0:1, :], out=out)
        for j in range(1, terms):
            out.addcmul_(x[..., j:j + 1], y[..., j:j + 1, :])
        return out

    return run


def _shown_transposed(kernel: Kernel, preps: Sequence[_Input], out_term: str,
                      swapped: bool) -> bool | None:
    """Whether an unbatched product is better written straight into its step's term.

    True where the step shows the product's output transposed (a matrix of one left
    and one right label) and the product in that orientation reads no more views of
    its inputs; None otherwise.
    """
    if len(kernel.left) != 1 or len(kernel.right) != 1 or kernel.batch:
        return None
    (left,), (right,) = kernel.left, kernel.right
    if out_term not in (left + right, right + left) or (out_term == right + left) == swapped:
        return None  # not a matrix, or shown as made (no view of the output)
    contracted = "".join(kernel.contracted)

    def views(transposed: bool) -> int:
        """Views the inputs need: one where an input is not the matrix as it is."""
        a_rows = contracted + left if transposed else left + contracted
        b_rows = right + contracted if transposed else contracted + right
        return sum(not (prep.plain and not prep.made and prep.term == rows)
                   for prep, rows in zip(preps, (a_rows, b_rows), strict=True))

    # Writing into the shown layout costs an allocation call; made, a view of it.
    return True if views(not swapped) <= views(swapped) else None


def _bmm_promoting(
    preps: Sequence[_Input], names: Sequence[str], target: str, present: Callable[[Any], Any],
    a_view: ViewChain, b_view: ViewChain, swapped: bool, product: Callable[..., Any],
    promoted: Sequence[tuple[int, str, _Input]],
) -> Op:
    """A product whose prepared inputs are kept: they replace the inputs they came from."""
    a_prep, b_prep = preps
    a_name, b_name = names
    kept_views = [(position, name, ViewChain(functools.partial(arrange, labels=prep.labels,
                                                               target=prep.term)))
                  for position, name, prep in promoted]

    def run_promoting(live: Live, workspace: list[Any]) -> dict[str, Any]:
        a_ready = a_prep(live[a_name], workspace)
        b_ready = b_prep(live[b_name], workspace)
        a = a_view(a_ready if a_prep.made else live[a_name])
        b = b_view(b_ready if b_prep.made else live[b_name])
        live[target] = present(product(b, a) if swapped else product(a, b))
        ready = (a_ready, b_ready)
        return {name: view(ready[position]) for position, name, view in kept_views}

    return run_promoting
