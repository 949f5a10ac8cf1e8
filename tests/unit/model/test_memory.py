"""Forward memory: the schedule and its replay, by hand on tiny equations."""

from __future__ import annotations

import pytest

from einsum_analyze import Plan, analyze, parse_equation, plan_contraction, simulate_memory
from einsum_analyze.model.memory import Event, forward_schedule, input_elements

CHAIN = ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])  # inputs 6 + 12 + 20 = 38 elements


def chain_plan(path=((0, 1), (0, 1))):
    return Plan.from_path(parse_equation(*CHAIN), path)


def replay(plan, itemsize=8, retain=()):
    return simulate_memory(
        forward_schedule(plan, retain),
        input_elements=input_elements(plan),
        output_elements=plan.steps[-1].output_elements,
        itemsize=itemsize,
    )


def test_forward_schedule_of_chain():
    events = forward_schedule(chain_plan())
    assert [(e.kind, e.tensor, e.elements, e.phase) for e in events] == [
        ("alloc", "x3", 8, "forward"),  # ab,bc -> ca
        ("alloc", "x4", 10, "forward"),  # ca,cd -> ad (the output, never freed)
        ("free", "x3", 8, "forward"),
    ]


def test_forward_peak_of_chain_by_hand():
    plan = chain_plan()
    assert input_elements(plan) == 38
    mem = replay(plan, itemsize=8)
    # live elements after each event: 38 + 8, + 10, - 8
    assert mem.live_bytes == (46 * 8, 56 * 8, 48 * 8)
    assert mem.input_bytes == 38 * 8
    assert mem.peak_bytes == 56 * 8
    assert mem.peak_bytes_without_inputs == 18 * 8
    assert mem.peak_event == 1
    assert mem.forward_peak_bytes == mem.peak_bytes
    assert mem.final_bytes == 48 * 8  # inputs and the output
    assert mem.retained_bytes == 0  # inference keeps nothing for backward
    assert mem.itemsize == 8


def test_forward_peak_depends_on_the_path():
    # cd,bc -> db (15 elements) then db,ab -> ad (10)
    mem = replay(chain_plan(((1, 2), (0, 1))), itemsize=4)
    assert mem.peak_bytes == (38 + 15 + 10) * 4
    assert mem.peak_bytes_without_inputs == 25 * 4


def test_single_step_peak_is_inputs_plus_output():
    plan = plan_contraction(parse_equation("ab,bc->ac", [(2, 3), (3, 4)]))
    mem = replay(plan, itemsize=4)
    assert [(e.kind, e.tensor) for e in forward_schedule(plan)] == [("alloc", "x2")]
    assert mem.peak_bytes == (6 + 12 + 8) * 4
    assert mem.peak_bytes_without_inputs == 8 * 4
    assert mem.retained_bytes == 0


def test_retained_intermediates_stay_live():
    plan = chain_plan()
    events = forward_schedule(plan, retain=[3])
    assert [e.kind for e in events] == ["alloc", "alloc"]
    mem = replay(plan, itemsize=8, retain=[3])
    assert mem.retained_bytes == 8 * 8
    assert mem.final_bytes == (38 + 8 + 10) * 8
    assert mem.peak_bytes == 56 * 8


def test_operands_with_repeated_indices_count_every_element():
    report = analyze("ii->", [(128, 128)], dtype="float32")
    assert report.forward_memory.input_bytes == 128 * 128 * 4
    report = analyze("ijj,k->ik", [(4, 3, 3), (5,)], dtype="float64")
    assert report.forward_memory.input_bytes == (36 + 5) * 8


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 16])
def test_bytes_scale_with_itemsize(itemsize):
    plan = chain_plan(((1, 2), (0, 1)))
    one = replay(plan, itemsize=1)
    mem = replay(plan, itemsize=itemsize)
    assert mem.input_bytes == one.input_bytes * itemsize
    assert mem.peak_bytes == one.peak_bytes * itemsize
    assert mem.forward_peak_bytes == one.forward_peak_bytes * itemsize
    assert mem.final_bytes == one.final_bytes * itemsize
    assert mem.live_bytes == tuple(b * itemsize for b in one.live_bytes)
    assert mem.peak_event == one.peak_event


def test_analyze_reports_the_forward_replay():
    report = analyze(*CHAIN, optimize="optimal", dtype="float64")
    assert report.forward_memory.peak_bytes == 56 * 8
    assert report.forward_memory.peak_bytes_without_inputs == 18 * 8
    assert report.forward_memory.retained_bytes == 0
    assert analyze(*CHAIN, optimize="optimal", dtype="float16").forward_memory.peak_bytes == 112


def test_empty_schedule():
    mem = simulate_memory([], input_elements=10, output_elements=0, itemsize=4)
    assert mem.peak_bytes == 40
    assert mem.peak_event == -1
    assert mem.live_bytes == ()
    assert mem.peak_bytes_without_inputs == 0


def test_peak_event_is_the_first_time_the_peak_is_reached():
    events = [
        Event(kind="alloc", tensor="a", elements=5, phase="forward"),
        Event(kind="free", tensor="a", elements=5, phase="forward"),
        Event(kind="alloc", tensor="b", elements=5, phase="forward"),
    ]
    mem = simulate_memory(events, input_elements=0, output_elements=5, itemsize=1)
    assert mem.peak_bytes == 5
    assert mem.peak_event == 0
    assert mem.live_bytes == (5, 0, 5)


def test_alloc_twice_is_an_error():
    events = [
        Event(kind="alloc", tensor="x1", elements=3, phase="forward"),
        Event(kind="alloc", tensor="x1", elements=3, phase="forward"),
    ]
    with pytest.raises(ValueError, match=r"tensor x1 allocated twice"):
        simulate_memory(events, input_elements=0, output_elements=3, itemsize=4)


@pytest.mark.parametrize(
    "events",
    [
        [Event(kind="free", tensor="x7", elements=3, phase="forward")],
        [
            Event(kind="alloc", tensor="x7", elements=3, phase="forward"),
            Event(kind="free", tensor="x7", elements=3, phase="forward"),
            Event(kind="free", tensor="x7", elements=3, phase="forward"),
        ],
    ],
    ids=["never-allocated", "freed-twice"],
)
def test_free_not_live_is_an_error(events):
    with pytest.raises(ValueError, match=r"tensor x7 freed but not live"):
        simulate_memory(events, input_elements=0, output_elements=0, itemsize=4)
