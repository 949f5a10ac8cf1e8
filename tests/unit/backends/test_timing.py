"""Timing logic with an injected fake clock and a counting fence (no real time is read)."""

from __future__ import annotations

import random

import pytest

from einsum_analyze.backends.timing import (
    NOISY,
    VERY_NOISY,
    Measurement,
    measure,
    measure_interleaved,
    prepare,
)


class FakeDevice:
    """A clock that advances only when the timed call (or the setup) runs.

    Every call takes ``call_s`` seconds times a seeded noise factor of at most 1%; every
    setup takes ``setup_s``. The fence and the clock count how often they are used, and
    the log records their order.
    """

    def __init__(self, call_s: float, setup_s: float = 0.0, seed: int = 0) -> None:
        self.now = 1000.0
        self.call_s = call_s
        self.setup_s = setup_s
        self.rng = random.Random(seed)
        self.calls = 0
        self.setups = 0
        self.fences = 0
        self.reads = 0
        self.log: list[str] = []
        self.states: list[object] = []

    def clock(self) -> float:
        self.reads += 1
        self.log.append("clock")
        return self.now

    def fence(self) -> None:
        self.fences += 1
        self.log.append("fence")

    def call(self, state: object) -> None:
        self.calls += 1
        self.states.append(state)
        self.log.append("call")
        self.now += self.call_s * (1 + 0.01 * self.rng.uniform(-1, 1))

    def setup(self) -> object:
        self.setups += 1
        self.log.append("setup")
        self.now += self.setup_s
        return ("state", self.setups)


def run(device: FakeDevice, **options) -> Measurement:
    options.setdefault("fence", device.fence)
    return measure(device.call, clock=device.clock, **options)


# --- warm-up and block growth ----------------------------------------------------------------


def test_block_grows_tenfold_until_the_target():
    # 1 ms a call, target 20 ms: blocks of 1 (1 ms), 10 (10 ms), 100 (100 ms >= 20 ms).
    device = FakeDevice(call_s=1e-3)
    m = run(device, repeats=5, warmup=2, target_block_s=0.02)
    assert m.calls_per_block == 100
    assert m.warmup_calls == 2 + 1 + 10 + 100  # the growth blocks count as warm-up
    assert len(m.block_times_s) == 5
    assert device.calls == 2 + 1 + 10 + 100 + 5 * 100
    assert m.median_s == pytest.approx(1e-3, rel=0.011)


def test_block_growth_stops_at_the_cap():
    # 1 us a call never reaches 20 ms below 1000 calls: blocks of 1, 10, 100, then 1000.
    device = FakeDevice(call_s=1e-6)
    m = run(device, repeats=3, warmup=0, target_block_s=0.02, max_calls_per_block=1000)
    assert m.calls_per_block == 1000
    assert m.warmup_calls == 1 + 10 + 100
    assert device.calls == 111 + 3 * 1000
    small_cap = run(FakeDevice(call_s=1e-6), repeats=2, warmup=0, max_calls_per_block=50)
    assert small_cap.calls_per_block == 50
    assert small_cap.warmup_calls == 1 + 10


def test_slow_call_is_timed_one_call_a_block():
    device = FakeDevice(call_s=0.05)
    m = run(device, repeats=4, warmup=3, target_block_s=0.02)
    assert m.calls_per_block == 1
    assert m.warmup_calls == 3 + 1
    assert device.calls == 3 + 1 + 4


def test_warmup_count_and_fences():
    device = FakeDevice(call_s=0.05)
    m = run(device, repeats=2, warmup=5, fence_name="fake.sync")
    blocks = 5 + 1 + 2  # warm-up, one growth block, repeats
    assert device.fences == 2 * blocks  # before the clock starts and before it stops
    assert device.reads == 2 * blocks
    assert m.fence == "fake.sync"
    # Every timed region is fence, clock, the calls, fence, clock.
    assert device.log[:5] == ["fence", "clock", "call", "fence", "clock"]


def test_measurement_is_deterministic_with_a_seeded_clock():
    first = run(FakeDevice(call_s=1e-3, seed=7), repeats=5, warmup=1)
    again = run(FakeDevice(call_s=1e-3, seed=7), repeats=5, warmup=1)
    other = run(FakeDevice(call_s=1e-3, seed=8), repeats=5, warmup=1)
    assert first == again
    assert first.block_times_s != other.block_times_s


# --- setup: one call a block, setup outside the clock ----------------------------------------


def test_setup_makes_every_block_one_call_with_setup_outside_the_clock():
    device = FakeDevice(call_s=1e-4, setup_s=5.0)  # setup is 50,000x the call
    m = measure(device.call, setup=device.setup, repeats=4, warmup=2, fence=device.fence,
                clock=device.clock)
    assert m.calls_per_block == 1  # no growth even though a call is far below the target
    assert m.warmup_calls == 2
    # Each timed block makes one untimed call of its own before the timed one.
    assert device.setups == device.calls == 2 + 2 * 4
    assert all(t == pytest.approx(1e-4, rel=0.011) for t in m.block_times_s)
    # Each call receives the state its own setup made, and the setup is fenced first.
    assert device.states == [("state", n) for n in range(1, 11)]
    warmup = ["setup", "fence", "clock", "call", "fence", "clock"]
    assert device.log[:6] == warmup
    timed = device.log[12:20]
    assert timed == ["setup", "call", "setup", "fence", "clock", "call", "fence", "clock"]


def test_the_untimed_call_before_a_timed_one_stays_out_of_the_block():
    device = FakeDevice(call_s=1.0, setup_s=0.0)
    timer = prepare(device.call, setup=device.setup, warmup=0, fence=device.fence,
                    clock=device.clock)
    assert timer.block() == pytest.approx(1.0, rel=0.011)  # one call, not two
    assert device.calls == 2


def test_call_receives_none_without_setup():
    device = FakeDevice(call_s=0.05)
    run(device, repeats=1, warmup=0)
    assert set(device.states) == {None}


@pytest.mark.parametrize("repeats", [0, -1])
def test_repeats_below_one_raise(repeats):
    device = FakeDevice(call_s=1e-3)
    with pytest.raises(ValueError, match="repeats"):
        run(device, repeats=repeats)
    assert device.calls == 0  # refused before anything ran


# --- statistics ------------------------------------------------------------------------------


def measurement(blocks, calls=1) -> Measurement:
    return Measurement(block_times_s=tuple(blocks), calls_per_block=calls, warmup_calls=0,
                       fence="none")


def test_statistics_of_five_blocks():
    m = measurement([5.0, 1.0, 4.0, 2.0, 3.0], calls=2)
    assert m.per_call_s == (2.5, 0.5, 2.0, 1.0, 1.5)
    assert m.median_s == 1.5
    assert m.quantile_s(0.25) == 1.0
    assert m.quantile_s(0.75) == 2.0
    assert m.quantile_s(0.0) == 0.5
    assert m.quantile_s(1.0) == 2.5
    assert m.iqr_s == 1.0
    assert m.relative_spread == pytest.approx(1 / 1.5)


def test_quantiles_interpolate_linearly():
    m = measurement([1.0, 2.0, 3.0, 4.0])
    assert m.median_s == 2.5
    assert m.quantile_s(0.25) == 1.75  # position 0.75
    assert m.quantile_s(0.75) == 3.25  # position 2.25
    assert m.iqr_s == 1.5


def test_single_block_has_no_spread():
    m = measurement([0.25])
    assert m.median_s == m.quantile_s(0.1) == m.quantile_s(0.9) == 0.25
    assert m.iqr_s == 0.0
    assert m.relative_spread == 0.0
    assert m.warning("x") is None


def test_zero_durations_are_clamped():
    m = measurement([0.0, 0.0, 0.0], calls=10)
    assert all(t > 0 for t in m.per_call_s)
    assert m.median_s == pytest.approx(1e-10)
    assert m.relative_spread == 0.0


@pytest.mark.parametrize(
    ("q1", "q3", "level"),
    [
        (9.75, 10.25, None),  # 5%
        (9.5, 10.49, None),  # just below 10%
        (9.5, 10.5, "noisy"),  # exactly 10%
        (9.0, 11.49, "noisy"),  # just below 25%
        (9.0, 11.5, "interfered"),  # exactly 25%
        (5.0, 20.0, "interfered"),
    ],
)
def test_spread_warnings(q1, q3, level):
    # Five blocks: the quartiles are the second and fourth, the median is 10.
    m = measurement([1.0, q1, 10.0, q3, 30.0])
    assert m.median_s == 10.0
    assert m.relative_spread == pytest.approx((q3 - q1) / 10)
    note = m.warning("reverse forward on cpu")
    if level is None:
        assert note is None
        return
    assert note is not None and note.startswith("reverse forward on cpu: IQR is ")
    assert f"{m.relative_spread:.0%}" in note
    if level == "noisy":
        assert "(noisy)" in note and "interfered" not in note
    else:
        assert "interfered" in note and "rerun on a quiet machine" in note


def test_thresholds():
    assert (NOISY, VERY_NOISY) == (0.10, 0.25)


def test_to_dict():
    m = Measurement(block_times_s=(4.0, 2.0, 6.0), calls_per_block=2, warmup_calls=7,
                    fence="torch.cuda.synchronize")
    assert m.to_dict() == {
        "median": 2.0,
        "p25": 1.5,
        "p75": 2.5,
        "iqr": 1.0,
        "min": 1.0,
        "max": 3.0,
        "blocks": 3,
        "calls_per_block": 2,
        "warmup_calls": 7,
        "fence": "torch.cuda.synchronize",
    }


def test_real_clock_smoke():
    m = measure(lambda state: sum(range(50)), repeats=3, warmup=1, target_block_s=1e-4)
    data = m.to_dict()
    assert data["median"] > 0 and data["min"] <= data["median"] <= data["max"]
    assert data["blocks"] == 3


# --- timing several callables side by side ---------------------------------------------------


class LoadedMachine:
    """One clock for several calls; after ``switch_at`` calls, every call takes ``load``
    times as long (another process started on the machine)."""

    def __init__(self, switch_at: int, load: float) -> None:
        self.now = 0.0
        self.calls = 0
        self.switch_at = switch_at
        self.load = load
        self.log: list[str] = []

    def clock(self) -> float:
        return self.now

    def call(self, name: str, seconds: float):
        def timed(state: object) -> None:
            self.calls += 1
            self.log.append(name)
            self.now += seconds * (self.load if self.calls > self.switch_at else 1.0)

        return timed


def test_a_change_of_load_during_interleaved_rounds_leaves_the_ratio_alone():
    # Warm-up makes 2 calls per timer, and each timed block 2 (one untimed); the load
    # triples after 2 + 2 + 5 rounds of 4 calls.
    machine = LoadedMachine(switch_at=4 + 20, load=3.0)
    base = prepare(machine.call("base", 0.5), setup=lambda: None, warmup=2,
                   clock=machine.clock)
    slow = prepare(machine.call("slow", 1.0), setup=lambda: None, warmup=2,
                   clock=machine.clock)
    base_m, slow_m = measure_interleaved([base, slow], repeats=10)
    assert slow_m.median_s / base_m.median_s == pytest.approx(2.0)
    assert base_m.median_s == pytest.approx(0.5 * 2)  # half the blocks at 1x, half at 3x


def test_the_same_change_of_load_between_separate_measurements_moves_the_ratio():
    machine = LoadedMachine(switch_at=2 + 20, load=3.0)  # during the second measurement
    base_m = measure(machine.call("base", 0.5), setup=lambda: None, repeats=10, warmup=2,
                     clock=machine.clock)
    slow_m = measure(machine.call("slow", 1.0), setup=lambda: None, repeats=10, warmup=2,
                     clock=machine.clock)
    assert slow_m.median_s / base_m.median_s == pytest.approx(6.0)


def test_rounds_take_one_block_of_each_and_rotate_the_first():
    machine = LoadedMachine(switch_at=10**6, load=1.0)
    timers = [prepare(machine.call(name, 1.0), setup=lambda: None, warmup=0,
                      clock=machine.clock) for name in "abc"]
    measured = measure_interleaved(timers, repeats=4)
    assert machine.log == list("aabbcc" "bbccaa" "ccaabb" "aabbcc")  # each untimed, then timed
    assert [m.block_times_s for m in measured] == [(1.0,) * 4] * 3


def test_prepared_timers_keep_their_block_size_and_warmup_count():
    device = FakeDevice(call_s=0.0001)
    timer = prepare(device.call, warmup=3, clock=device.clock, fence=device.fence,
                    fence_name="fake", target_block_s=0.02)
    (m,) = measure_interleaved([timer], repeats=4)
    assert m.calls_per_block == 1000  # 0.1 ms a call: 1, 10, 100 calls are under 20 ms
    assert m.warmup_calls == 3 + 1 + 10 + 100
    assert m.fence == "fake" and len(m.block_times_s) == 4


def test_the_garbage_collector_is_paused_in_setups_and_timed_calls_and_restored():
    import gc

    seen: list[tuple[str, bool]] = []

    def setup() -> None:
        seen.append(("setup", gc.isenabled()))

    def call(_: object) -> None:
        seen.append(("call", gc.isenabled()))

    assert gc.isenabled()
    timer = prepare(call, setup=setup, warmup=1)
    measure_interleaved([timer, prepare(call, warmup=1, max_calls_per_block=1)], repeats=2)
    assert gc.isenabled()
    assert {phase for phase, _ in seen} == {"setup", "call"}
    assert not any(enabled for _, enabled in seen)
    gc.disable()  # a caller's own pause is left as it was
    try:
        measure_interleaved([timer], repeats=1)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_rounds_start_after_collecting_the_young_generations_only(monkeypatch):
    import gc

    from einsum_analyze.backends import timing

    collected: list[tuple[int, ...]] = []
    real = gc.collect
    monkeypatch.setattr(timing.gc, "collect", lambda *gen: collected.append(gen) or real(*gen))
    measure_interleaved([prepare(lambda _: None, warmup=1, max_calls_per_block=1)], repeats=1)
    assert collected == [(timing.COLLECTED,)] and timing.COLLECTED < 2  # never the whole heap
