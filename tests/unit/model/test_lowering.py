"""Lowering contractions to kernels: which copies and sums happen, and their workspace."""

from __future__ import annotations

import pytest
import torch
from corpus import by_name

from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.backends.torch_backend import compile_schedule, run_schedule
from einsum_analyze.model.lowering import (
    InputPrep,
    Layout,
    lower_contraction,
    lower_events,
    lower_to_layout,
)
from einsum_analyze.model.memory import forward_schedule, input_elements, simulate_memory
from einsum_analyze.model.schedule import Event
from einsum_analyze.strategies import build_strategy

SIZES = {"a": 2, "b": 3, "c": 4, "i": 5, "j": 6, "k": 7, "x": 8, "y": 9, "o": 1}


def lower(terms, output, sizes=SIZES):
    return lower_contraction([Layout.contiguous(t, sizes) for t in terms], output, sizes)


# --- layouts ---------------------------------------------------------------------------------


def test_contiguous_layout_orders_labels_by_stride():
    assert Layout.contiguous("abc", SIZES) == Layout("abc", ("a", "b", "c"), True)
    # Size-1 labels never constrain a layout: they are left out.
    assert Layout.contiguous("aob", SIZES).memory == ("a", "b")
    # A repeated label is a diagonal: its stride is the sum of its positions', not dense.
    diagonal = Layout.contiguous("aii", SIZES)
    assert diagonal.memory == ("a", "i")
    assert not diagonal.dense
    assert Layout.packed("ba", ("a", "b")) == Layout("ba", ("a", "b"), True)


# --- two inputs ------------------------------------------------------------------------------


def test_plain_matmul_needs_no_workspace():
    kernel = lower(["ab", "bc"], "ac")
    assert kernel.kind == "bmm"
    assert (kernel.batch, kernel.left, kernel.contracted, kernel.right) == ((), ("a",), ("b",),
                                                                            ("c",))
    assert kernel.workspace == ()
    assert all(prep.copy == () and prep.reduce == () for prep in kernel.inputs)
    assert kernel.out_order == ("a", "c")
    assert kernel.promote == ()


@pytest.mark.parametrize(("terms", "output"), [
    (["ba", "bc"], "ac"),  # A^T B: a transposed view
    (["ab", "cb"], "ac"),  # A B^T
    (["ba", "cb"], "ac"),  # A^T B^T
    (["ab", "bc"], "ca"),  # the output permuted: written as (a, c), presented as a view
])
def test_transposed_layouts_need_no_copy_for_bmm(terms, output):
    kernel = lower(terms, output)
    assert kernel.kind == "bmm"
    assert kernel.workspace == ()
    assert [prep.copy for prep in kernel.inputs] == [(), ()]
    assert kernel.inputs[0].order == Layout.contiguous(terms[0], SIZES).memory


def test_innermost_batch_index_forces_a_copy():
    # b is a batch index (both inputs and the output) but innermost in ikb: bmm needs the
    # batch outermost, so ikb is copied to (b, i, k): 3 * 5 * 7 = 105 elements.
    kernel = lower(["ikb", "bkj"], "bij")
    assert kernel.kind == "bmm"
    assert kernel.batch == ("b",)
    assert kernel.inputs[0].copy == ("b", "i", "k")
    assert kernel.inputs[1].copy == ()
    assert kernel.workspace == (3 * 5 * 7,)
    assert kernel.out_order == ("b", "i", "j")


def test_copy_chooses_the_cheaper_input():
    # The batch orders disagree: (a, b) in abik (210 elements), (b, a) in bakj (252).
    # One of them is copied, and it is the smaller: bakj's batch order is kept.
    kernel = lower(["abik", "bakj"], "abij")
    assert kernel.batch == ("b", "a")
    assert kernel.inputs[0].copy == ("b", "a", "i", "k")
    assert kernel.inputs[1].copy == ()
    assert kernel.workspace == (2 * 3 * 5 * 7,)


def test_private_index_is_summed_first_into_workspace_of_the_kept_size():
    # x is held by abx alone and not by the output: summed away first, into a buffer of
    # the kept labels (a, b): 6 elements; then a plain matmul.
    kernel = lower(["abx", "bc"], "ac")
    assert kernel.kind == "bmm"
    assert kernel.inputs[0] == InputPrep(reduce=("x",), keep=("a", "b"), copy=(),
                                         order=("a", "b"))
    assert kernel.workspace == (2 * 3,)


def test_private_indices_on_both_sides():
    kernel = lower(["abx", "bcy"], "ac")
    assert [prep.reduce for prep in kernel.inputs] == [("x",), ("y",)]
    assert kernel.workspace == (2 * 3, 3 * 4)


def test_nothing_summed_between_inputs_is_an_elementwise_product():
    kernel = lower(["ab", "ab"], "ab")
    assert kernel.kind == "mul"
    assert kernel.batch == ("a", "b")
    assert kernel.workspace == ()
    outer = lower(["a", "c"], "ac")
    assert (outer.kind, outer.left, outer.right, outer.out_order) == ("mul", ("a",), ("c",),
                                                                     ("a", "c"))
    # A private index still needs its sum first: the product itself sums nothing shared.
    private = lower(["ax", "c"], "ac")
    assert (private.kind, private.workspace) == ("mul", (2,))


def test_three_inputs_never_reach_the_lowering():
    # A plan runs a step of three tensors pairwise (model/pairwise.py): one here is a bug.
    with pytest.raises(AssertionError, match=r"a contraction of 3 tensors .* pairwise"):
        lower(["ab", "bc", "ca"], "")


# --- one input -------------------------------------------------------------------------------


def test_single_input_sum_is_a_reduce_written_directly():
    kernel = lower(["abc"], "ac")
    assert kernel.kind == "reduce"
    assert kernel.inputs[0].reduce == ("b",)
    assert kernel.out_order == ("a", "c")
    assert kernel.workspace == ()  # the sum writes the output, no temporary


def test_single_input_without_a_sum_is_a_copy():
    permute = lower(["ab"], "ba")
    assert permute.kind == "copy"
    assert permute.out_order == ("a", "b")  # written in memory order, presented permuted
    assert permute.workspace == ()
    diagonal = lower(["ii"], "i")
    assert (diagonal.kind, diagonal.out_order) == ("copy", ("i",))
    trace = lower(["ii"], "")
    assert (trace.kind, trace.inputs[0].reduce) == ("reduce", ("i",))


def test_size_one_labels_are_squeezed():
    # o has size 1: it neither batches nor constrains the layout.
    kernel = lower(["oab", "bco"], "ac")
    assert kernel.kind == "bmm"
    assert kernel.workspace == ()
    assert kernel.batch == ()


# --- promotion of a retained intermediate's copy ---------------------------------------------


@pytest.fixture(scope="module")
def readme():
    """bc,bd,cm,mdn->bn (b=512) on the greedy path: mdn,cm -> dnc; dnc,bc -> dnb;
    dnb,bd -> bn. The last step needs dnb as (b, n, d) and copies it: 7168 elements."""
    case = by_name("readme")
    eq = parse_equation(case.equation, case.shapes)
    plan = plan_contraction(eq, "greedy")
    assert [s.equation for s in plan.steps] == ["mdn,cm->dnc", "dnc,bc->dnb", "dnb,bd->bn"]
    return eq, plan


@pytest.fixture
def no_lookahead(monkeypatch):
    """Strategies lowered without the lookahead: each product copies what it needs."""
    import functools

    import einsum_analyze.strategies.registry as registry

    monkeypatch.setattr(registry, "lower_events",
                        functools.partial(lower_events, lookahead=False))


def test_lookahead_writes_the_retained_tensor_as_its_product_reads_it(readme):
    eq, plan = readme
    result = build_strategy("reverse", plan, range(4), itemsize=8)
    events = {e.tensor: e for e in result.events if e.kind == "alloc"}
    # dnc,bc -> dnb is computed transposed, written (b, d, n): the last step (summing d
    # over the batch b) reads it as it is.
    assert events["x5"].kernel.out_order == ("b", "d", "n")
    assert events["x6"].workspace == ()
    assert events["x6"].kernel.promote == ()
    # Nothing is copied any more; without the lookahead, x5 (7168 elements) and the small
    # dnc (28) and its gradient are.
    assert all(e.workspace == () for e in result.events)
    plain = lower_events(result.events, eq.terms, eq.size_dict, lookahead=False)
    assert sum(sum(e.workspace) for e in plain if e.kind != "free") == 512 * 7 * 2 + 2 * 28
    # The product writes the lookahead's order; its values are unchanged (float64 oracle).
    compiled = compile_schedule(result.events, eq.size_dict)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64) for s in eq.shapes]
    live = {f"in{k}": t for k, t in enumerate(operands)}
    with torch.no_grad():
        for op in compiled.forward:
            op(live, [])
    torch.testing.assert_close(live[compiled.output], torch.einsum(eq.explicit, *operands))
    assert live["x5"].permute(2, 0, 1).is_contiguous()


def test_retained_input_copy_is_promoted(readme, no_lookahead):
    eq, plan = readme
    result = build_strategy("reverse", plan, range(4), itemsize=8)
    events = {e.tensor: e for e in result.events if e.kind == "alloc"}
    last = events["x6"]  # dnb,bd -> bn reads x5 (dnb), kept for bd's gradient
    assert last.inputs == ("x5", "in1")
    assert last.kernel.inputs[0].copy == ("b", "n", "d")
    assert last.workspace == (512 * 7 * 2,)
    assert last.kernel.promote == (0,)
    # The backward product that reads x5 again finds it in the copy's order: no new copy.
    d1 = events["d1"]
    assert "x5" in d1.inputs
    assert d1.kernel.inputs[d1.inputs.index("x5")].copy == ()
    assert d1.workspace == ()
    # Without the promotion, x5 in its written order would be copied once more.
    unpromoted = lower_contraction(
        [Layout.packed("bn", ("b", "n")), Layout.packed("dnb", events["x5"].kernel.out_order)],
        "bd", eq.size_dict)
    assert unpromoted.workspace == (512 * 7 * 2,)
    # One tensor is kept, not two: retained bytes are x4 and x5, once each.
    assert result.memory.retained_bytes == (7 * 2 * 2 + 7 * 2 * 512) * 8


def test_inference_never_promotes(readme):
    eq, plan = readme
    assert lower_events(forward_schedule(plan), eq.terms, eq.size_dict)[-1].workspace == ()
    events = lower_events(forward_schedule(plan), eq.terms, eq.size_dict, lookahead=False)
    assert all(e.kernel is None or e.kernel.promote == () for e in events)
    last = [e for e in events if e.kind == "alloc"][-1]
    assert last.workspace == (512 * 7 * 2,)  # the copy is still made, then freed
    mem = simulate_memory(events, input_elements=input_elements(plan),
                          output_elements=plan.steps[-1].output_elements, itemsize=8)
    # At the last step x5 (7168) is live with its copy (7168) and the output (3584).
    assert mem.high_bytes[-2] == mem.input_bytes + (7168 + 7168 + 3584) * 8


def test_promoted_copy_replaces_the_tensor_in_the_executor(readme, no_lookahead):
    eq, plan = readme
    result = build_strategy("reverse", plan, range(4), itemsize=8)
    compiled = compile_schedule(result.events, eq.size_dict)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64) for s in eq.shapes]
    live = {f"in{k}": t for k, t in enumerate(operands)}
    with torch.no_grad():
        for op in compiled.forward:
            before = live.get("x5")
            kept = op(live, [])
            if kept:
                assert set(kept) == {"x5"}
                storage = kept["x5"].untyped_storage()
                assert storage.data_ptr() != before.untyped_storage().data_ptr()
                torch.testing.assert_close(kept["x5"], before)
                live.update(kept)
    x5 = live["x5"]
    assert x5.shape == (2, 7, 512)  # still dnb to every reader
    assert x5.permute(2, 1, 0).is_contiguous()  # stored (b, n, d)
    assert x5.untyped_storage().nbytes() == 7168 * 8


@pytest.mark.parametrize("optimizer", ["dp", "greedy"])
def test_tn18_promotions_keep_memory_exact(optimizer):
    case = by_name("tn18-b512")
    eq = parse_equation(case.equation, case.shapes)
    plan = plan_contraction(eq, optimizer)
    result = build_strategy("reverse", plan, range(18), itemsize=8)
    freed = {e.tensor for e in result.events if e.kind == "free" and e.phase == "forward"}
    promoted = [
        (e.inputs[p], e.kernel.inputs[p])
        for e in result.events if e.kernel is not None
        for p in e.kernel.promote
    ]
    assert promoted, "tn18-b512 reverse has retained intermediates copied before a product"
    for name, prep in promoted:
        assert name.startswith("x") and name not in freed
        assert prep.copy
    # Promotion swaps a tensor for a copy of the same size: retained bytes are unchanged.
    intermediates = sum(step.output_elements for step in plan.steps[:-1])
    assert result.memory.retained_bytes == intermediates * 8
    generator = torch.Generator().manual_seed(1)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64) for s in eq.shapes]
    upstream = torch.randn([eq.size_dict[c] for c in eq.output], generator=generator,
                           dtype=torch.float64)
    run = run_schedule(result.events, operands, upstream, eq.size_dict)
    assert run.live_bytes == result.memory.live_bytes
    assert run.high_bytes == result.memory.high_bytes


# --- lookahead: a wished output order -------------------------------------------------------


def test_lower_to_layout_computes_the_transposed_product():
    ab, bc = Layout.contiguous("ab", SIZES), Layout.contiguous("bc", SIZES)
    kernel = lower_to_layout([ab, bc], "ac", SIZES, ("c", "a"))
    assert kernel is not None and kernel.kind == "bmm"
    assert kernel.out_order == ("c", "a") and kernel.workspace == ()
    assert (kernel.left, kernel.right) == (("a",), ("c",))
    # The plain product writes (a, c); no kernel writes a label order that splits a group.
    assert lower_contraction([ab, bc], "ac", SIZES).out_order == ("a", "c")


def test_lower_to_layout_copies_an_input_to_order_a_group():
    # ijk,kx->ijx: the left group (i, j) written as (j, i) needs A copied.
    ijk, kx = Layout.contiguous("ijk", SIZES), Layout.contiguous("kx", SIZES)
    kernel = lower_to_layout([ijk, kx], "ijx", SIZES, ("j", "i", "x"))
    assert kernel is not None
    assert kernel.inputs[0].copy == ("j", "i", "k")
    assert kernel.workspace == (6 * 5 * 7,)
    # A batch label must come first: no bmm writes it inside.
    ajk, akx = Layout.contiguous("ajk", SIZES), Layout.contiguous("akx", SIZES)
    assert lower_to_layout([ajk, akx], "ajx", SIZES, ("j", "a", "x")) is None
    assert lower_to_layout([ajk, akx], "ajx", SIZES, ("a", "x", "j")).out_order == (
        "a", "x", "j")


def test_lower_to_layout_lets_an_elementwise_product_write_any_order():
    ab, bc = Layout.contiguous("ab", SIZES), Layout.contiguous("bc", SIZES)
    kernel = lower_to_layout([ab, bc], "abc", SIZES, ("c", "b", "a"))
    assert kernel is not None and kernel.kind == "mul"
    assert kernel.out_order == ("c", "b", "a") and kernel.workspace == ()
    assert lower_to_layout([ab, bc], "abc", SIZES, ("c", "a")) is None  # not its labels


@pytest.mark.parametrize("target", [("c", "a"), ("a", "c")])
def test_the_transposed_product_runs_as_lowered(target):
    sizes = {"a": 3, "b": 4, "c": 5}
    ab, bc = Layout.contiguous("ab", sizes), Layout.contiguous("bc", sizes)
    kernel = lower_to_layout([ab, bc], "ac", sizes, target)
    assert kernel is not None
    event = Event("alloc", "x2", 15, "forward", op="contract", inputs=("in0", "in1"),
                  equation="ab,bc->ac", kernel=kernel, workspace=kernel.workspace)
    compiled = compile_schedule([event], sizes)
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    live = {"in0": a, "in1": b}
    compiled.forward[0](live, [])
    torch.testing.assert_close(live["x2"], a @ b)
    assert live["x2"].permute([("a", "c").index(c) for c in target]).is_contiguous()
    assert live["x2"].untyped_storage().nbytes() == 15 * 8
