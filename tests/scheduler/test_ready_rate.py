"""The ready-rate meter the observers keep: executions per second over a window of executions, up to now."""

from __future__ import annotations

import pytest

from gyre.protocol import Execution
from gyre.scheduler.rate import ReadyRate
from gyre.trainer.buffer import ExecutionBuffer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_rate_over_the_last_window_of_executions_and_decaying_while_none_arrive():
    clock = Clock()
    meter = ReadyRate(window=8, clock=clock)
    assert meter.rate() is None  # nothing measured yet
    meter.add(4)
    assert meter.rate() is None  # one event has no span
    for _ in range(3):  # groups of 4 every 10 s, then 4 every second: only the recent burst counts
        clock.now += 10
        meter.add(4)
    for _ in range(4):
        clock.now += 1
        meter.add(4)
    assert meter.rate() == pytest.approx(8 / 2)  # the window: the last 8 executions after the oldest kept event
    clock.now += 6  # nothing for 6 s: the estimate falls instead of keeping the burst's value
    assert meter.rate() == pytest.approx(8 / 8)
    meter.add(0)  # nothing became ready: no event
    assert meter.rate() == pytest.approx(8 / 8)
    with pytest.raises(ValueError, match="window must be >= 1"):
        ReadyRate(window=0)


def test_the_buffer_records_each_group_when_it_becomes_ready():
    clock = Clock()
    buffer = ExecutionBuffer(group_size=2, ready_rate=ReadyRate(window=4, clock=clock))

    def finish(group_id: str, name: str) -> None:
        buffer.finish(group_id, Execution(id=name, task_id="task", group=group_id, calls=[], status="finished"))

    for t in (0.0, 5.0, 10.0):
        clock.now = t
        group = buffer.new_group("task", 0)
        finish(group.id, f"{t}a")
        if t == 10.0:  # one member of the last group done: it is not ready, so not counted yet
            assert buffer.ready_rate.rate() == pytest.approx(2 / 10)
        finish(group.id, f"{t}b")
    assert buffer.ready_rate.rate() == pytest.approx(4 / 10)  # the two groups after the first, over 10 s
