"""Choose the kernels of one contraction: its copies, its product, its output layout.

A step ``A, B -> C`` runs as one batched matrix product (or an elementwise product
when nothing is summed), after summing away the indices private to one input and,
where an input's memory layout cannot be viewed as the matrix the product needs,
after copying it. Those sums and copies are workspace: allocated inside the step and
freed at its end. :mod:`einsum_analyze.model.lowering` follows every tensor's layout
through a schedule with these choices.

Indices of size 1 never constrain a layout: they are squeezed and unsqueezed as views.
Everything here works on labels and sizes; no arrays.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import filterfalse
from typing import Any, NamedTuple

from .schedule import InputPrep, Kernel

__all__ = [
    "AboveOne", "Layout", "cached_kernel", "copied_elements", "lower_contraction",
    "lower_to_layout", "lower_to_layouts", "readable_orders",
]


class Layout(NamedTuple):
    """How a tensor sits in memory, as far as the kernels care.

    A named tuple rather than a frozen dataclass: the lowering looks layouts up by value
    thousands of times per schedule, and a tuple hashes and compares in C.

    Attributes:
        dims: The label of each dimension (an operand may repeat one: ``"ijj"``).
        memory: Its distinct labels of size above 1, outermost first in memory.
        dense: Whether those labels cover the storage without gaps (not a diagonal).
    """

    dims: str
    memory: tuple[str, ...]
    dense: bool

    @classmethod
    def contiguous(cls, dims: str, sizes: Mapping[str, int]) -> Layout:
        """A tensor stored in the order of its dimensions (an operand, a new gradient)."""
        memory, dense = _memory_labels(dims, sizes)
        return cls(dims, memory, dense)

    @classmethod
    def packed(cls, dims: str, memory: Sequence[str]) -> Layout:
        """A dense tensor written by a kernel in the memory order ``memory``."""
        return cls(dims, tuple(memory), True)


def _memory_labels(dims: str, sizes: Mapping[str, int]) -> tuple[tuple[str, ...], bool]:
    """Memory order and density of a contiguous tensor's one-axis-per-label view.

    Returns the distinct labels (size other than 1: a size-0 label is not squeezed) by
    decreasing stride, and whether the view is dense.

    A repeated label (a diagonal) has the sum of its positions' strides; such a view is
    not dense.
    """
    stride = 1
    label_stride: dict[str, int] = {}
    count: dict[str, int] = {}
    for char in reversed(dims):
        size = sizes[char]
        if size != 1:
            label_stride[char] = label_stride.get(char, 0) + stride
            count[char] = count.get(char, 0) + 1
        stride *= size
    ordered = tuple(sorted(label_stride, key=lambda c: -label_stride[c]))
    return ordered, all(n == 1 for n in count.values())


def _blocks(order: tuple[str, ...], first: tuple[str, ...], second: tuple[str, ...],
            third: tuple[str, ...]) -> bool:
    """Whether ``order`` is ``first`` then the other two groups, in either order.

    Each group must be contiguous; ``first`` and ``second`` in exactly the given label
    order. ``third`` is the labels of ``order`` in one set, in ``order``'s own order (what
    :func:`_within` gives), so that a contiguous run of them compares as a tuple.
    """
    n1 = len(first)
    if order[:n1] != first:
        return False
    n2 = n1 + len(second)
    if order[n1:n2] == second and order[n2:] == third:
        return True
    n3 = n1 + len(third)
    return order[n3:] == second and order[n1:n3] == third


def _elements(labels: Iterable[str], sizes: Mapping[str, int]) -> int:
    return math.prod(map(sizes.__getitem__, labels))


# Label filters run as ``filter`` over a set's ``__contains__`` rather than as
# comprehensions: the intermediates of a large network hold hundreds of labels, and
# these loops run in C.


AboveOne = dict[Any, Any]
"""Label sets over one ``sizes``, remembered: each term's labels of size above 1 by the
term (:func:`_above_one`), and the :class:`_Roles` of the labels of a product's two
input terms and output by the three terms. The lowering asks for the same terms in
every pass, and a term's text hashes once."""


def _above_one(labels: str, sizes: Mapping[str, int], memo: AboveOne | None) -> frozenset[str]:
    """The labels whose size is not 1 (a set comprehension beats ``compress`` here)."""
    if memo is None:
        return frozenset({char for char in labels if sizes[char] != 1})
    found: frozenset[str] | None = memo.get(labels)
    if found is None:
        found = memo[labels] = frozenset({char for char in labels if sizes[char] != 1})
    return found


class _Roles(NamedTuple):
    """What each label of size above 1 is in a product ``A, B -> C``, from the terms alone.

    ``private_a`` and ``private_b``: summed away before the product; ``contracted``: in
    both inputs, not in the output; ``batch``, ``left``, ``right``: in the output and in
    both inputs, in A only, in B only. ``a_kept`` and ``b_kept``: the elements of each
    input's labels less its private ones (what the product reads of an input whose
    memory holds all its labels, and what a copy of it holds).
    """

    a: frozenset[str]
    b: frozenset[str]
    out: frozenset[str]
    private_a: frozenset[str]
    private_b: frozenset[str]
    contracted: frozenset[str]
    batch: frozenset[str]
    left: frozenset[str]
    right: frozenset[str]
    a_kept: int
    b_kept: int


def _roles(a_dims: str, b_dims: str, output: str, sizes: Mapping[str, int],
           memo: AboveOne | None) -> _Roles:
    """The :class:`_Roles` of a product's labels, through ``memo`` when one is given."""
    key = (a_dims, b_dims, output)
    found: _Roles | None = memo.get(key) if memo is not None else None
    if found is None:
        a = _above_one(a_dims, sizes, memo)
        b = _above_one(b_dims, sizes, memo)
        big = _above_one(output, sizes, memo)
        private_a, private_b = a - b - big, b - a - big
        found = _Roles(a, b, big, private_a, private_b, (a & b) - big, big & a & b,
                       big & a - b, big & b - a, _elements(a - private_a, sizes),
                       _elements(b - private_b, sizes))
        if memo is not None:
            memo[key] = found
    return found


def _within(order: Sequence[str], labels: Collection[str]) -> tuple[str, ...]:
    """The labels of ``order`` that are in ``labels`` (a set), in order."""
    if not labels:  # often so (a product without batch labels): no filter to run
        return ()
    return tuple(filter(labels.__contains__, order))


def _prepare(
    layout: Layout, private: Collection[str], sizes: Mapping[str, int],
    kept: int | None = None,
) -> tuple[tuple[str, ...], bool, tuple[str, ...], tuple[str, ...], int]:
    """Sum away ``private`` labels; returns (order, dense, reduce, keep, workspace).

    ``kept``: the elements of the labels kept, where known (:attr:`_Roles.a_kept`).
    """
    order, dense = layout.memory, layout.dense
    if not private:  # the usual case: nothing to sum
        return order, dense, (), (), 0
    reduce = _within(order, private)
    if not reduce:
        return order, dense, (), (), 0
    keep = tuple(filterfalse(private.__contains__, order))
    return keep, True, reduce, keep, _elements(keep, sizes) if kept is None else kept


_Prepared = tuple[tuple[str, ...], bool, tuple[str, ...], tuple[str, ...], int]


def _prepare_pair(
    layouts: Sequence[Layout], roles: _Roles, sizes: Mapping[str, int],
) -> tuple[_Prepared, _Prepared, list[int], frozenset[str], tuple[int, int] | None]:
    """Both inputs of a product, each summed over its private labels (:func:`_prepare`).

    Returns each input's preparation, the workspace of the sums, the contracted labels,
    and the elements each input's order holds where the memory of both holds all their
    labels (as a rule; None otherwise): then every group the product forms is the
    terms' own, and a copy of an input holds its order's elements.
    """
    a_layout, b_layout = layouts
    # An input's memory holds all its labels (as a rule): the terms' labels say what
    # its order keeps. Otherwise its memory order does.
    a_whole = len(a_layout.memory) == len(roles.a)
    b_whole = len(b_layout.memory) == len(roles.b)
    a_prep = _prepare(a_layout, roles.private_a, sizes, roles.a_kept if a_whole else None)
    b_prep = _prepare(b_layout, roles.private_b, sizes, roles.b_kept if b_whole else None)
    # Explicit tests rather than a comprehension: this runs for every kernel chosen.
    workspace = [a_prep[4]] if a_prep[4] else []
    if b_prep[4]:
        workspace.append(b_prep[4])
    if a_whole:
        contracted = roles.contracted
    else:
        contracted = frozenset(a_prep[0]) & roles.b - roles.out
    known = (roles.a_kept, roles.b_kept) if a_whole and b_whole else None
    return a_prep, b_prep, workspace, contracted, known


def lower_contraction(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int], *,
    above: AboveOne | None = None,
) -> Kernel:
    """Choose the kernel, the copies and the output layout of one contraction.

    Args:
        layouts: Layout of each input (its dims are its term in the step).
        output: The step's output term (distinct labels).
        sizes: Size of every label.
        above: A table of each term's labels of size above 1 over ``sizes``
            (:data:`AboveOne`), filled as it goes; None: none kept.

    Returns:
        The :class:`Kernel`.

    Example:
        >>> sizes = {"a": 2, "b": 3, "c": 4}
        >>> ab, bc = Layout.contiguous("ab", sizes), Layout.contiguous("bc", sizes)
        >>> k = lower_contraction([ab, bc], "ac", sizes)
        >>> k.kind, k.workspace
        ('bmm', ())
    """
    kernel = _lower_contraction(layouts, output, sizes, above)
    inputs = kernel.inputs  # as a rule nothing is summed first: no upcasts to look for
    if inputs and (inputs[0].reduce or (len(inputs) > 1 and inputs[1].reduce)):
        return _with_upcasts(kernel, layouts, sizes)
    return kernel


def _lower_contraction(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int], above: AboveOne | None,
) -> Kernel:
    if len(layouts) > 2:
        # torch.einsum would build intermediates no schedule sees: plans run it pairwise.
        raise AssertionError(f"a contraction of {len(layouts)} tensors reached the lowering; "
                             "a plan runs such a step pairwise (model/pairwise.py)")
    if len(layouts) == 1:
        (layout,) = layouts
        big = _above_one(output, sizes, above)
        private = set(layout.dims) - big
        order, dense, reduce, keep, work = _prepare(layout, private, sizes)
        prep = InputPrep(reduce=reduce, keep=keep, copy=(), order=order)
        kept = _within(order, big)
        if reduce:
            # The sum writes the output directly, in the kept labels' memory order.
            return Kernel(kind="reduce", inputs=(prep,), out_order=kept)
        return Kernel(kind="copy", inputs=(prep,), out_order=kept)

    roles = _roles(layouts[0].dims, layouts[1].dims, output, sizes, above)
    a_prep, b_prep, workspace, contracted_set, known = _prepare_pair(layouts, roles, sizes)
    a_order, _, a_reduce, a_keep, _ = a_prep
    b_order, _, b_reduce, b_keep, _ = b_prep
    left = _within(a_order, roles.left)
    right = _within(b_order, roles.right)

    if not contracted_set:
        batch = _within(a_order, roles.b)
        out_order = batch + left + right
        return Kernel(
            kind="mul",
            inputs=(
                InputPrep(reduce=a_reduce, keep=a_keep, copy=(), order=a_order),
                InputPrep(reduce=b_reduce, keep=b_keep, copy=(), order=b_order),
            ),
            batch=batch,
            left=left,
            right=right,
            out_order=out_order,
            workspace=tuple(workspace),
        )

    # Take the batch and contracted orders from one input or the other, whichever
    # leaves less to copy (the larger input on a tie). Written out rather than as a
    # loop over the two choices: this runs for every kernel chosen.
    a_size, b_size = known or (_elements(a_order, sizes), _elements(b_order, sizes))
    batch_set = roles.batch
    reference, second = (a_order, b_order) if a_size >= b_size else (b_order, a_order)
    batch = _within(reference, batch_set)
    contracted = _within(reference, contracted_set)
    a_copy, b_copy = _block_copies(a_prep, b_prep, batch, left, contracted, right)
    if a_copy or b_copy:  # the first choice copies: try the other input's orders
        other_batch = _within(second, batch_set)
        other_contracted = _within(second, contracted_set)
        if other_batch != batch or other_contracted != contracted:
            other_a, other_b = _block_copies(a_prep, b_prep, other_batch, left,
                                             other_contracted, right)
            # The first of the cheapest.
            if ((a_size if other_a else 0) + (b_size if other_b else 0)
                    < (a_size if a_copy else 0) + (b_size if b_copy else 0)):
                batch, contracted, a_copy, b_copy = (other_batch, other_contracted,
                                                     other_a, other_b)
    return _bmm_kernel(
        _NEW(InputPrep, (a_reduce, a_keep, a_copy, a_copy or a_order)),
        _NEW(InputPrep, (b_reduce, b_keep, b_copy, b_copy or b_order)),
        batch, left, contracted, right, batch + left + right, workspace, sizes, known,
    )


def _block_copies(
    a_prep: _Prepared, b_prep: _Prepared, batch: tuple[str, ...], left: tuple[str, ...],
    contracted: tuple[str, ...], right: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each input's copy for a bmm of these groups (empty: read as it lies).

    An input is read as it lies when dense, ``batch`` first, then its own two groups in
    either order.
    """
    a_copy: tuple[str, ...] = ()
    if not (a_prep[1] and _blocks(a_prep[0], batch, contracted, left)):
        a_copy = batch + left + contracted
    b_copy: tuple[str, ...] = ()
    if not (b_prep[1] and _blocks(b_prep[0], batch, contracted, right)):
        b_copy = batch + contracted + right
    return a_copy, b_copy


def _bmm_kernel(
    a: InputPrep, b: InputPrep, batch: tuple[str, ...], left: tuple[str, ...],
    contracted: tuple[str, ...], right: tuple[str, ...], out_order: tuple[str, ...],
    workspace: list[int], sizes: Mapping[str, int], known: tuple[int, int] | None,
) -> Kernel:
    """A batched matmul of ``a`` and ``b``; each input's copy, if any, joins the workspace.

    ``known``: each input's elements, which its copy holds (:func:`_prepare_pair`).
    """
    if a.copy:
        workspace.append(known[0] if known else _elements(a.copy, sizes))
    if b.copy:
        workspace.append(known[1] if known else _elements(b.copy, sizes))
    # Built as a tuple of all its fields (no named tuple __new__ call): this runs for
    # every kernel chosen.
    return _NEW(Kernel, ("bmm", (a, b), batch, left, contracted, right, out_order,
                         tuple(workspace), (), ()))


_NEW = tuple.__new__
"""Builds a named tuple from a tuple of all its fields."""
assert Kernel._fields == ("kind", "inputs", "batch", "left", "contracted", "right",
                          "out_order", "workspace", "promote", "upcast")
assert InputPrep._fields == ("reduce", "keep", "copy", "order")


def lower_to_layout(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int],
    target: Sequence[str],
) -> Kernel | None:
    """A kernel of a two-input contraction that writes its output in ``target`` order.

    A ``bmm`` writes ``batch + left + right`` or, computing the transposed product,
    ``batch + right + left``; each group's order follows the inputs, which are copied
    where they do not already lie that way. An elementwise product writes any order.

    Args:
        layouts: Layout of each input.
        output: The step's output term.
        sizes: Size of every label.
        target: The wished memory order of the output's labels of size above 1.

    Returns:
        The kernel, or None when no kernel can write ``target``.

    Example:
        >>> sizes = {"a": 2, "b": 3, "c": 4}
        >>> ab, bc = Layout.contiguous("ab", sizes), Layout.contiguous("bc", sizes)
        >>> k = lower_to_layout([ab, bc], "ac", sizes, ("c", "a"))
        >>> k.out_order, k.workspace
        (('c', 'a'), ())
    """
    kernel, = lower_to_layouts(layouts, output, sizes, (target,))
    return kernel


def lower_to_layouts(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int],
    targets: Sequence[Sequence[str]], *, above: AboveOne | None = None,
) -> list[Kernel | None]:
    """:func:`lower_to_layout` for each of ``targets`` (the inputs prepared once).

    ``above`` is :func:`lower_contraction`'s table.
    """
    # Two inputs each; as a rule nothing is summed first: no upcasts to look for.
    return [kernel if kernel is None or not (kernel.inputs[0].reduce or kernel.inputs[1].reduce)
            else _with_upcasts(kernel, layouts, sizes)
            for kernel in _lower_to_layouts(layouts, output, sizes, targets, above)]


def _lower_to_layouts(
    layouts: Sequence[Layout], output: str, sizes: Mapping[str, int],
    targets: Sequence[Sequence[str]], above: AboveOne | None,
) -> list[Kernel | None]:
    roles = _roles(layouts[0].dims, layouts[1].dims, output, sizes, above)
    a_prep, b_prep, workspace, contracted_set, known = _prepare_pair(layouts, roles, sizes)
    a_order, a_dense, a_reduce, a_keep, _ = a_prep
    b_order, b_dense, b_reduce, b_keep, _ = b_prep
    big, batch_set, left_set, right_set = roles.out, roles.batch, roles.left, roles.right
    kernels: list[Kernel | None] = []
    for wished in targets:
        target = tuple(wished)
        if set(target) != big or len(target) != len(big):
            kernels.append(None)
        elif not contracted_set:
            kernels.append(Kernel(
                kind="mul",
                inputs=(
                    InputPrep(reduce=a_reduce, keep=a_keep, copy=(), order=a_order),
                    InputPrep(reduce=b_reduce, keep=b_keep, copy=(), order=b_order),
                ),
                batch=_within(a_order, roles.b),
                left=_within(a_order, left_set),
                right=_within(b_order, right_set),
                out_order=target,
                workspace=tuple(workspace),
            ))
        else:
            kernels.append(_bmm_to(a_prep, b_prep, (batch_set, left_set, right_set),
                                   contracted_set, target, list(workspace), sizes, known))
    return kernels


def _bmm_to(
    a_prep: _Prepared, b_prep: _Prepared,
    groups: tuple[frozenset[str], frozenset[str], frozenset[str]],
    contracted_set: frozenset[str], target: tuple[str, ...], workspace: list[int],
    sizes: Mapping[str, int], known: tuple[int, int] | None,
) -> Kernel | None:
    """The bmm writing ``target`` (None: its groups cannot be split so).

    ``known``: each input's elements, where :func:`_prepare_pair` knows them.
    """
    a_order, _, a_reduce, a_keep, _ = a_prep
    b_order, _, b_reduce, b_keep, _ = b_prep
    batch_set, left_set, right_set = groups
    nb = len(batch_set)
    batch, rest = target[:nb], target[nb:]
    if set(batch) != batch_set:
        return None
    if set(rest[:len(left_set)]) == left_set:
        left, right = rest[:len(left_set)], rest[len(left_set):]
    elif set(rest[:len(right_set)]) == right_set:
        right, left = rest[:len(right_set)], rest[len(right_set):]
    else:
        return None
    # The contracted order from one input or the other, whichever copies less (the
    # first on a tie), written out as in _lower_contraction.
    contracted = _within(a_order, contracted_set)
    a_copy, b_copy, copied = _copies_to(a_prep, b_prep, batch, left, contracted, right, sizes,
                                        known)
    if copied:  # the first choice copies: try the second input's order
        other = _within(b_order, contracted_set)
        if other != contracted:
            other_a, other_b, other_copied = _copies_to(a_prep, b_prep, batch, left, other,
                                                        right, sizes, known)
            if other_copied < copied:
                contracted, a_copy, b_copy = other, other_a, other_b
    return _bmm_kernel(
        _NEW(InputPrep, (a_reduce, a_keep, a_copy, a_copy or a_order)),
        _NEW(InputPrep, (b_reduce, b_keep, b_copy, b_copy or b_order)),
        batch, left, contracted, right, target, workspace, sizes, known,
    )


def _copies_to(
    a_prep: _Prepared, b_prep: _Prepared, batch: tuple[str, ...], left: tuple[str, ...],
    contracted: tuple[str, ...], right: tuple[str, ...], sizes: Mapping[str, int],
    known: tuple[int, int] | None,
) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """Each input's copy for a bmm of these groups (empty: read as it lies), and their elements."""
    a_order, b_order = a_prep[0], b_prep[0]
    a_copy: tuple[str, ...] = ()
    copied = 0
    if not (a_prep[1] and a_order in (batch + left + contracted, batch + contracted + left)):
        a_copy = batch + left + contracted
        copied = known[0] if known else _elements(a_copy, sizes)
    b_copy: tuple[str, ...] = ()
    if not (b_prep[1] and b_order in (batch + contracted + right, batch + right + contracted)):
        b_copy = batch + contracted + right
        copied += known[1] if known else _elements(b_copy, sizes)
    return a_copy, b_copy, copied


def _with_upcasts(kernel: Kernel, layouts: Sequence[Layout], sizes: Mapping[str, int]) -> Kernel:
    """The kernel with the float32 temporaries of its half-precision sums on the cpu.

    On the cpu, torch sums a float16 or bfloat16 tensor over labels that lie in two or
    more separate runs of its memory through float32: a float32 result, then a float32
    copy of the input, then the sum (``should_use_acc_buffer`` in ATen's reductions).
    Each entry of :attr:`Kernel.upcast` says what of the step's own tensors is live
    then (elements of the dtype) and how many float32 elements the sum adds.
    """
    inputs = kernel.inputs  # none for an "einsum", one for a "reduce" or a "copy"
    if not inputs or not (inputs[0].reduce or (len(inputs) > 1 and inputs[1].reduce)):
        return kernel
    upcast: list[tuple[int, int]] = []
    made = 0  # elements of the step's buffers made before this input's sum
    for layout, prep in zip(layouts, kernel.inputs, strict=True):
        kept = _elements(prep.keep, sizes) if prep.reduce else 0
        if prep.reduce and _separate_runs(layout, prep.reduce, sizes) > 1:
            viewed = _elements(prep.reduce + prep.keep, sizes)
            if viewed:
                upcast.append((made + kept, kept + viewed))
        made += kept + (_elements(prep.copy, sizes) if prep.copy else 0)
    return kernel._replace(upcast=tuple(upcast)) if upcast else kernel


def _separate_runs(layout: Layout, labels: Sequence[str], sizes: Mapping[str, int]) -> int:
    """In how many separate runs of memory ``labels`` lie (what a sum cannot merge)."""
    stride: dict[str, int] = {}
    if layout.dense:
        step = 1
        for char in reversed(layout.memory):
            stride[char] = step
            step *= sizes[char]
    else:  # a diagonal of a contiguous operand: each label's strides add up
        step = 1
        for char in reversed(layout.dims):
            if sizes[char] != 1:
                stride[char] = stride.get(char, 0) + step
            step *= sizes[char]
    ordered = sorted(labels, key=stride.__getitem__)
    return 1 + sum(stride[inner] * sizes[inner] != stride[outer]
                   for inner, outer in zip(ordered, ordered[1:], strict=False))


def cached_kernel(
    inputs: tuple[Layout, ...],
    out_term: str,
    sizes: Mapping[str, int],
    cache: dict[tuple[tuple[Layout, ...], str], Kernel] | None,
    above: AboveOne | None = None,
) -> Kernel:
    """:func:`lower_contraction`, through ``cache`` when one is given."""
    found = cache.get((inputs, out_term)) if cache is not None else None
    if found is None:
        found = lower_contraction(inputs, out_term, sizes, above=above)
        if cache is not None:
            cache[(inputs, out_term)] = found
    return found


def copied_elements(kernel: Kernel, sizes: Mapping[str, int]) -> int:
    """Elements a kernel copies, counting a transposing elementwise product as a copy.

    An elementwise product whose output order permutes the labels of its larger input
    reads that input out of order: it costs about what copying its output would.
    """
    copied = sum(kernel.workspace)
    if kernel.kind != "mul":
        return copied
    larger = max((prep.order for prep in kernel.inputs), key=lambda o: _elements(o, sizes))
    inside = set(larger)
    if _within(kernel.out_order, inside) != tuple(larger):
        copied += _elements(kernel.out_order, sizes)
    return copied


def readable_orders(kernel: Kernel, position: int) -> tuple[tuple[str, ...], ...]:
    """The memory orders in which a bmm reads its input ``position`` without a copy.

    The preferred order first (a tie in copies goes to it). A matrix times a vector (one
    input has no labels of its own) reads the matrix best with its own labels innermost,
    whichever side it is on: each output element is then read by its own thread, side by
    side. With the summed labels innermost instead, the device reads a few elements per
    output element at a wide stride (on an H200, a batched matrix-vector product of
    1280x2 matrices ran 2.8x slower so than torch.einsum's copy and product).
    """
    batch, contracted = kernel.batch, kernel.contracted
    own = kernel.left if position == 0 else kernel.right
    other = kernel.right if position == 0 else kernel.left
    first = batch + own + contracted
    second = batch + contracted + own
    return (first, second) if position == 0 and other else (second, first)
