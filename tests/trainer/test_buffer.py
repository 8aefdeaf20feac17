"""The execution buffer applies StartTrainStep and AbortStale as the simulator does: whole groups, oldest
version first, exactly the stale executions the policy counted."""

from __future__ import annotations

import pytest

from gyre.protocol import Execution
from gyre.trainer.buffer import ExecutionBuffer


def execution(name: str) -> Execution:
    return Execution(id=name, task_id="t", group="g", calls=[], status="finished", reward=0.0)


def finished_group(buffer: ExecutionBuffer, version: int) -> str:
    group = buffer.new_group(f"task{version}", version)
    for index in range(buffer.group_size):
        buffer.finish(group.id, execution(f"{group.id}-{index}"))
    return group.id


def test_take_drops_exactly_the_oldest_then_takes_by_version_then_completion():
    buffer = ExecutionBuffer(group_size=2)
    ids = [finished_group(buffer, v) for v in (3, 1, 3)]
    late_old = finished_group(buffer, 1)  # completed last, but version 1
    assert buffer.ready_versions() == ((1, 4), (3, 4))
    taken = buffer.take(count=4, drop=2)  # the first version-1 group is dropped, the other taken first
    assert [g.id for g in taken] == [late_old, ids[0]]
    assert buffer.dropped_stale == 2 and buffer.ready_count == 2
    with pytest.raises(ValueError, match="drop 1 stale executions; whole groups come to 2"):
        buffer.take(count=2, drop=1)


def test_abort_removes_running_groups_dispatched_before_a_version():
    buffer = ExecutionBuffer(group_size=2)
    old, new = buffer.new_group("a", 0), buffer.new_group("b", 2)
    buffer.finish(old.id, execution("a0"))  # one member done: the group still counts as running
    assert buffer.running_versions() == ((0, 2), (2, 2))
    assert buffer.abort(before_version=1) == [old]
    assert buffer.aborted == 2 and buffer.running == 2 and buffer.running_versions() == ((2, 2),)
    assert new.id in buffer.open and old.id not in buffer.open
