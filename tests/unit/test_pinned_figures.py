"""Figures computed by hand, pinned where only golden snapshots used to look.

Each test names the rule it pins and the bug it catches: every one was checked to fail
with that bug planted by hand (and to pass without it). All figures are float64 (8 bytes
an element); the arithmetic is written next to each figure.

Only stable public paths are imported: ``einsum_analyze.analyze`` and
``einsum_analyze.model.lowering``.
"""

from __future__ import annotations

import pytest

from einsum_analyze import analyze
from einsum_analyze.model.lowering import Layout, lower_contraction

F64 = 8


def strategy(equation, shapes, name, *, optimize="auto", grad="all"):
    report = analyze(equation, shapes, dtype="float64", optimize=optimize, grad=grad,
                     strategies=(name,))
    (result,) = report.strategies
    return result


def contraction(result, tensor):
    (event,) = [e for e in result.events if e.kind == "alloc" and e.tensor == tensor]
    return event


# --- a tie of equal input sizes in lower_contraction -------------------------------------
#
# A product takes its batch and contracted orders from one input or the other, whichever
# leaves less to copy; on equal copies and equal sizes, from the FIRST input. Bug caught:
# `a_size >= b_size` turned into `a_size > b_size` (the second input wins the tie).

TIE_SIZES = {"e": 4, "d": 3, "a": 3, "f": 2}


def test_tie_takes_the_batch_order_of_the_first_input():
    # fda,afd->da: both inputs have 2*3*3 = 18 elements. Memory orders (size > 1 only):
    # fda is (f, d, a), afd is (a, f, d); batch {d, a}, contracted {f}. Neither input is
    # (batch, contracted) in memory whichever batch order is chosen, so both are copied
    # either way (18 + 18 elements): a tie, and the first input, fda, sets the batch
    # order: (d, a), as it sits in fda's memory.
    fda = Layout.contiguous("fda", TIE_SIZES)
    afd = Layout.contiguous("afd", TIE_SIZES)
    kernel = lower_contraction([fda, afd], "da", TIE_SIZES)
    assert kernel.kind == "bmm"
    assert kernel.batch == ("d", "a")
    assert kernel.contracted == ("f",)
    assert kernel.out_order == ("d", "a")
    assert [prep.copy for prep in kernel.inputs] == [("d", "a", "f"), ("d", "a", "f")]
    assert kernel.workspace == (18, 18)


def test_tie_decides_a_later_copy_and_the_training_peak():
    # ed,afd,fda->ade, shapes 4x3, 3x2x3, 2x3x3 (e=4, d=3, a=3, f=2), path (1,2) then
    # (0,1), reverse mode, every operand differentiated.
    #   inputs: 12 + 18 + 18 = 48 elements
    #   forward  x3 = fda,afd->da (9, memory order (d, a): the tie above), copies 18 + 18
    #            x4 = da,ed->ade  (36, elementwise)
    #   backward g4 seed (36)
    #            g3 = ade,ed->da  (9), copies of g4 (36) and in0 (12)
    #            d0 = ade,da->ed  (12), copy of g4 (36); x3 is read as it is, (d, a)
    # Peak, at g3's copies (and again at d0's):
    #   48 + 9 (x3) + 36 (x4) + 36 (g4) + 9 (g3) + 36 + 12 = 186 elements = 1,488 B.
    # With the tie lost to the second input, x3 is stored (a, d) and d0 must also copy
    # it: 48 + 9 + 36 + 36 + 9 + 12 (d0) + 36 + 9 = 195 elements = 1,560 B.
    result = strategy("ed,afd,fda->ade", [(4, 3), (3, 2, 3), (2, 3, 3)], "reverse",
                      optimize=[(1, 2), (0, 1)])
    x3 = contraction(result, "x3")
    assert x3.kernel.out_order == ("d", "a")
    d0 = contraction(result, "d0")
    assert d0.equation == "ade,da->ed"
    assert [prep.copy for prep in d0.kernel.inputs] == [("d", "e", "a"), ()]
    assert d0.workspace == (36,)
    assert result.memory.input_bytes == 48 * F64
    assert result.memory.peak_bytes == 186 * F64 == 1_488


# --- gradient order: the smaller gradient of a step first ---------------------------------
#
# Bug caught: sorting a step's gradients largest first (or not at all).


@pytest.mark.parametrize(
    ("equation", "shapes", "small", "large"),
    [("ij,j->", [(4, 3), (3,)], "d1", "d0"), ("j,ij->", [(3,), (4, 3)], "d0", "d1")],
    ids=["matrix-first", "vector-first"],
)
def test_smaller_gradient_of_a_step_is_computed_first(equation, shapes, small, large):
    # One step of a 4x3 matrix (ij) with a 3-vector (j); the step lists its inputs in
    # opposite orders in the two equations, so neither input order nor operand order can
    # pass for the rule. The vector's gradient (3 elements) comes first: ,ij->j sums i out
    # of the matrix into a 3-element workspace; then the matrix's gradient ,j->j (3
    # elements) is viewed as ij, no workspace.
    #   inputs 12 + 3 = 15, output x2: 1, upstream g2: 1
    #   small first:  15 + 1 + 1 + 3 (small) + 3 (workspace)          = 23 elements = 184 B
    #                 then large: 15 + 1 + 1 + 3 + 3 (large)          = 23 elements
    #   large first:  15 + 1 + 1 + 3 (large) + 3 (small) + 3 (workspace) = 26 el. = 208 B
    result = strategy(equation, shapes, "reverse")
    backward = [e.tensor for e in result.events if e.kind == "alloc" and e.phase == "backward"]
    assert backward == ["g2", small, large]
    assert contraction(result, small).workspace == (3,)
    assert contraction(result, large).workspace == ()
    assert result.memory.peak_bytes == 23 * F64 == 184


# --- the size-1 private index: a broadcast dimension, no reduction step -------------------
#
# Bug caught: the torch-autograd model summing away a size-1 private index as a step of
# its own (torch squeezes it: no kernel, no copy, no FLOPs).


def test_size_one_private_index_is_not_a_reduction_step():
    # ij,jk->k with shapes 1x3 and 3x4: i (size 1) is private to operand 0.
    # One forward step, jk,ij->k: joint space 1*3*4 = 12, j summed: 12 * 2 = 24 FLOPs.
    # Backward: d0 = k,jk->j (12 * 2 = 24) viewed as ij; d1 = k,ij->jk, where torch
    # squeezes the size-1 i: an outer product k,j->kj, 12 with nothing summed.
    # Peak: inputs 3 + 12, x2 4, g2 4, d0 3, d1 12 = 38 elements = 304 B; nothing
    # retained (the step reads the operands themselves).
    # With a reduction step for i: ij->j (3 * 2 = 6 FLOPs) first, 30 forward FLOPs, and
    # its 3-element result retained for backward.
    result = strategy("ij,jk->k", [(1, 3), (3, 4)], "torch-autograd")
    forward = [e for e in result.events if e.kind == "alloc" and e.phase == "forward"]
    assert [e.tensor for e in forward] == ["x2"]
    assert result.forward_flops == 24
    assert result.backward_flops == 36
    assert result.operand_flops == {0: 24, 1: 12}
    assert result.memory.retained_bytes == 0
    assert result.memory.peak_bytes == 38 * F64 == 304


def test_size_one_private_index_needs_no_sum_in_the_lowering():
    # The same step as the executor lowers it: i has size 1, so ij is read as the vector
    # j: nothing summed, nothing copied, no workspace.
    sizes = {"i": 1, "j": 3, "k": 4}
    kernel = lower_contraction(
        [Layout.contiguous("jk", sizes), Layout.contiguous("ij", sizes)], "k", sizes
    )
    assert kernel.kind == "bmm"
    assert [prep.reduce for prep in kernel.inputs] == [(), ()]
    assert kernel.workspace == ()


# --- FLOPs of private reductions in the torch-autograd model ------------------------------
#
# torch.einsum sums an index private to one operand before its product. On a two-operand
# equation torch's path and the report's path are the same single step. Bug caught: the
# reduction's FLOPs dropped, or counted on its output instead of its input, or counted
# without the sum.


def test_private_reduction_flops_in_the_torch_autograd_model():
    # ij,jk->k with shapes 5x3 and 3x4 (i=5, j=3, k=4): i is private to operand 0.
    # Forward:  x3 = ij->j   joint 5*3 = 15, one input, summed: 15 * 2 = 30
    #           x2 = jk,j->k joint 3*4 = 12, j summed:          12 * 2 = 24   -> 54
    # Backward: g0a = k,jk->j 12 * 2 = 24; d1 = k,j->jk 12 (nothing summed);
    #           d0 = g0a viewed as ij (broadcast along i): 0                  -> 36
    # Peak: inputs 15 + 12, xs0a 3, x2 4, g 4, g0a 3, d1 12 = 53 elements = 424 B;
    # retained: xs0a (the reduced copy), 3 elements = 24 B.
    result = strategy("ij,jk->k", [(5, 3), (3, 4)], "torch-autograd")
    reduced = contraction(result, "xs0a")  # operand 0's private sum, before the product
    assert (reduced.equation, reduced.flops) == ("ij->j", 30)
    assert contraction(result, "x2").flops == 24
    assert result.forward_flops == 54
    assert result.backward_flops == 36
    assert result.memory.retained_bytes == 3 * F64
    assert result.memory.peak_bytes == 53 * F64 == 424
    # The report's own forward figure is opt_einsum's for the path, one step over ijk:
    # 5*3*4 = 60, summed: 120.
    assert analyze("ij,jk->k", [(5, 3), (3, 4)], strategies=()).plan.flops == 120
