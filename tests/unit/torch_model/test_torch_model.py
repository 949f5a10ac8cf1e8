"""The model of torch.einsum under autograd, pinned with hand-computed figures.

Each figure below was worked out from ATen's einsum (the aligned dimension order, the
private sums, ``sumproduct_pair``'s permute + reshape + bmm) and checked once against
torch's ``saved_tensors_hooks``; tests/property/test_torch_einsum_saved.py checks the
model against torch on the whole corpus.
"""

from __future__ import annotations

import doctest
import importlib

import pytest
from corpus import CASES
from hypothesis import given
from hypothesis import strategies as st

from einsum_analyze.model.equation import parse_equation
from einsum_analyze.model.memory import simulate_memory
from einsum_analyze.model.planning import OPTIMIZERS, plan_contraction
from einsum_analyze.strategies import build_strategy
from einsum_analyze.torch_model.forward import (
    torch_autograd_schedule,
    torch_einsum_path,
)
from einsum_analyze.torch_model.layout import (
    contiguous_strides,
    mul_layout,
    nested,
    packed,
    packed_nests,
)


def schedule(text: str, shapes, grad):
    return torch_autograd_schedule(parse_equation(text, shapes), grad)


@pytest.mark.parametrize("name", ["einsum_analyze.torch_model.forward",
                                  "einsum_analyze.torch_model.layout",
                                  "einsum_analyze.torch_model.backward"])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(module)
    assert tests
    for test in tests:
        runner.run(test)
    assert runner.failures == 0


# --- the path torch plans ----------------------------------------------------------------


def test_two_operands_have_one_step():
    assert torch_einsum_path(parse_equation("ij,jk->ik", [(3, 4), (4, 5)])) == ((0, 1),)


def test_one_operand_has_no_pairwise_step():
    assert torch_einsum_path(parse_equation("ii->i", [(4, 4)])) == ()


def test_left_to_right_without_opt_einsum():
    # ATen puts each result in front; in the linear convention it is last.
    eq = parse_equation("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)])
    assert torch_einsum_path(eq, None) == ((0, 1), (0, 2), (0, 1))


def test_torch_path_uses_its_own_strategy_not_the_report_optimizer():
    # Contracting the two outer operands first would cost 9*9*9: torch's optimal path
    # pairs the middle with the last operand.
    eq = parse_equation("ab,bc,cd->ad", [(9, 2), (2, 9), (9, 2)])
    assert torch_einsum_path(eq) == ((1, 2), (0, 1))


def test_size_one_dims_share_their_label_for_the_path():
    # torch hands the text as typed to opt_einsum, which sees operand 1's 'j' at size 1000
    # (the largest size of the label), and pairs operands 0 and 1 first. The report's plan
    # sees a private size-1 label there, and pairs operands 1 and 2 first.
    import opt_einsum

    text, shapes = "ij,jk,kl->il", [(2, 1000), (1, 3), (3, 2)]
    eq = parse_equation(text, shapes)
    assert torch_einsum_path(eq) == ((0, 1), (0, 1))
    assert opt_einsum.contract_path(text, *shapes, shapes=True)[0] == [(0, 1), (0, 1)]
    assert plan_contraction(eq, "optimal").path == ((1, 2), (0, 1))


# --- what autograd keeps -----------------------------------------------------------------


def test_issue_example_keeps_the_reduced_copies():
    # a,df,jef->fej: step 1 sums 'a' (1 element) and 'd' (5), multiplies them (saving
    # both), step 2 multiplies operand 2 by that product (saving the product, 5).
    result = schedule("a,df,jef->fej", [(3,), (6, 5), (2, 4, 5)], [0, 1, 2])
    assert result.retained_elements == 1 + 5 + 5  # 88 B in float64, 44 B in float32
    assert [step.kind for step in result.steps] == ["mul", "mul"]
    assert result.steps[0].reduced == ("a", "d")


def test_kept_bytes_do_not_depend_on_the_report_optimizer():
    eq = parse_equation("a,df,jef->fej", [(3,), (6, 5), (2, 4, 5)])
    figures = {
        (r.memory.retained_bytes, r.memory.peak_bytes, r.forward_flops, r.backward_flops)
        for r in (build_strategy("torch-autograd", plan_contraction(eq, name), [0, 1, 2],
                                 itemsize=8)
                  for name in OPTIMIZERS)
    }
    assert len(figures) == 1
    ((retained, _, _, _),) = figures
    assert retained == 88


def test_gemm_keeps_nothing_beyond_its_operands():
    result = schedule("ij,jk->ik", [(3, 4), (4, 5)], [0, 1])
    assert result.retained_elements == 0
    assert result.steps[0].copied == (False, False)
    assert result.forward_flops == 2 * 3 * 4 * 5
    assert result.backward_flops == 2 * (2 * 3 * 4 * 5)
    assert result.operand_flops == {0: 120, 1: 120}


def test_a_reshape_that_cannot_view_copies_and_the_copy_is_kept():
    # ijk,j->ik: the left input must be (ik, j) but 'i' and 'k' are not adjacent in
    # memory (j lies between): the reshape copies all 24 elements. bmm keeps it when the
    # other input needs a gradient, not otherwise (the operand itself is not counted).
    kept = schedule("ijk,j->ik", [(2, 3, 4), (3,)], [1])
    assert kept.steps[0].copied == (True, False)
    assert kept.retained_elements == 24
    not_kept = schedule("ijk,j->ik", [(2, 3, 4), (3,)], [0])
    assert not_kept.retained_elements == 0
    # The copy still costs forward memory: operands + copy + output.
    mem = simulate_memory(not_kept.events, input_elements=27, output_elements=8, itemsize=8)
    assert mem.forward_peak_bytes == (27 + 24 + 8) * 8


def test_private_labels_are_summed_first_and_kept():
    # ij,k->i: 'j' summed in operand 0 (3 left), 'k' in operand 1 (1 left), then a mul.
    result = schedule("ij,k->i", [(3, 4), (5,)], [0, 1])
    assert result.steps[0].reduced == ("j", "k")
    assert result.retained_elements == 3 + 1
    # FLOPs: the two sums (2 * 12 and 2 * 5), the product (3).
    assert result.forward_flops == 24 + 10 + 3
    assert result.operand_flops == {0: 3, 1: 6}


def test_size_one_dims_are_absent_for_torch():
    # ij,j->i with j of size 1 in operand 1: operand 0 holds 'j' alone, so torch sums it
    # first; then a mul against what is, for torch, a scalar.
    result = schedule("ij,j->i", [(3, 4), (1,)], [0, 1])
    assert result.steps[0].kind == "mul"
    assert result.steps[0].reduced == ("j", "")
    assert result.retained_elements == 3


def test_nothing_is_kept_without_gradients():
    result = schedule("ijk,j->ik", [(2, 3, 4), (3,)], [])
    assert result.retained_elements == 0
    assert result.backward_flops == 0
    assert all(event.phase == "forward" for event in result.events)


def test_a_single_operand_view_allocates_nothing():
    result = schedule("ii->i", [(4, 4)], [0])
    forward = [e for e in result.events if e.phase == "forward"]
    assert [(e.kind, e.elements) for e in forward] == [("alloc", 0)]
    assert result.output_elements == 0
    # The gradient is the diagonal embedding: zeros of the operand's shape.
    backward = [e for e in result.events if e.phase == "backward" and e.kind == "alloc"]
    assert [(e.tensor, e.elements) for e in backward] == [("gx1", 4), ("d0", 16)]


def test_a_single_operand_sum_allocates_its_output():
    result = schedule("ij->i", [(3, 4)], [0])
    assert [step.kind for step in result.steps] == ["sum"]
    assert result.output_elements == 3
    assert result.forward_flops == 2 * 12
    # The gradient is the upstream gradient expanded: a view, no FLOPs.
    assert result.backward_flops == 0


# --- layouts -----------------------------------------------------------------------------


def test_nested_dims_flatten_without_a_copy():
    sizes = {0: 2, 1: 3, 2: 4}
    strides = dict(enumerate(contiguous_strides([2, 3, 4])))
    assert nested(sizes, strides, [(0, 1), (2,)])
    assert not nested(sizes, strides, [(0, 2), (1,)])
    assert nested(sizes, strides, [(0,), (2,), (1,)])


def test_packed_strides_skip_size_one_dims():
    # Dim 2 outermost, dim 0 innermost; dim 1 (size 1) takes no room.
    assert packed({0: 2, 2: 4}, [2, 1, 0]) == {0: 1, 2: 2}


@given(st.data())
def test_packed_nests_is_nested_of_the_packed_strides(data):
    # Sizes 0, 1 (a dim left out) and above; groups drawn over every dim, in any order.
    ndim = data.draw(st.integers(1, 6))
    drawn = data.draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=ndim, max_size=ndim))
    sizes = {d: s for d, s in enumerate(drawn) if s != 1}
    memory = data.draw(st.permutations(range(ndim)))
    dims = data.draw(st.permutations(range(ndim)))
    cuts = sorted(data.draw(st.lists(st.integers(0, ndim), max_size=3)))
    groups = [dims[a:b] for a, b in zip([0, *cuts], [*cuts, ndim], strict=True)]
    assert packed_nests(sizes, memory, groups) == nested(sizes, packed(sizes, memory), groups)


def test_packed_nests_reads_side_by_side_dims():
    sizes = {0: 2, 1: 3, 2: 4}
    assert packed_nests(sizes, [0, 1, 2], [(0, 1), (2,)])
    assert not packed_nests(sizes, [0, 1, 2], [(1, 0), (2,)])
    assert not packed_nests(sizes, [0, 2, 1], [(0, 1), (2,)])


def test_mul_of_same_layout_tensors_keeps_it():
    class T:
        def __init__(self, sizes, strides, dense):
            self.sizes, self.strides, self.dense = sizes, strides, lambda: dense

    a = T({0: 2, 1: 3}, {0: 1, 1: 2}, [1, 2])
    b = T({0: 2, 1: 3}, {0: 1, 1: 2}, [1, 2])
    strides, _ = mul_layout(a, b, {0: 2, 1: 3}, 2)
    assert strides == {0: 1, 1: 2}


# --- the strategy ------------------------------------------------------------------------


def test_build_matches_the_schedule():
    eq = parse_equation("ijk,j->ik", [(2, 3, 4), (3,)])
    result = build_strategy("torch-autograd", plan_contraction(eq), [1], itemsize=4)
    assert result.name == "torch-autograd"
    assert result.memory.retained_bytes == 24 * 4
    assert result.operand_flops == {1: 48}
    assert result.shared_flops == 0


@pytest.mark.parametrize("case", [c for c in CASES if len(c.shapes) >= 2], ids=str)
def test_every_intermediate_is_freed_or_kept(case):
    # After forward, exactly the kept storages and the output are live.
    eq = parse_equation(case.equation, case.shapes)
    result = torch_autograd_schedule(eq, range(eq.num_operands))
    live: dict[str, int] = {}
    for event in result.events:
        if event.phase != "forward":
            break
        if event.kind == "alloc":
            live[event.tensor] = event.elements
        else:
            del live[event.tensor]
    assert sum(live.values()) == result.retained_elements + result.output_elements
