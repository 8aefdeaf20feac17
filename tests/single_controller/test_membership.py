"""The membership record: one place that says which cell is in which group, read by every view."""

from __future__ import annotations

import asyncio

import pytest

from gyre.single_controller import DispatchMode, Membership, MembershipError, WorkerGroup, register


def test_a_move_is_planned_then_leaves_then_enters_with_time_in_each_state():
    now = [0.0]
    record = Membership(["c0", "c1"], clock=lambda: now[0])
    record.move({"c0": "rollout", "c1": "rollout"})
    now[0] = 1.0
    record.plan({"c0": "train"})  # asked for: still serving, shows its target
    assert record.group_of("c0") == "rollout" and record.target_of("c0") == "train"
    assert record.members("rollout") == ["c0", "c1"]
    with pytest.raises(MembershipError, match="c0 is already moving to train"):
        record.plan({"c0": "train"})
    with pytest.raises(MembershipError, match="c1 is already in rollout"):
        record.plan({"c1": "rollout", "c0": "x"})  # all or none: c0's plan is untouched by the failed call
    assert record.target_of("c0") == "train"
    now[0] = 2.0
    record.leave(["c0"])
    assert record.members("rollout") == ["c1"] and record.members("train") == [] and record.state("c0") == "switching"
    now[0] = 5.0
    record.enter(["c0"])
    assert record.members("train") == ["c0"] and record.target_of("c0") is None
    now[0] = 10.0
    assert record.seconds_in_states("c0") == {"idle": 0.0, "switching": 3.0, "rollout": 2.0, "train": 5.0}
    with pytest.raises(MembershipError, match="no planned move"):
        record.leave(["c1"])
    record.plan({"c1": "train"})
    with pytest.raises(MembershipError, match="has not left its group"):
        record.enter(["c1"])
    record.fail(["c1"])
    assert record.is_dead("c1") and record.members("rollout") == [] and record.state("c1") == "dead"
    with pytest.raises(MembershipError, match="c1 is dead"):
        record.plan({"c1": "rollout"})
    with pytest.raises(KeyError, match="'c9' is not a member"):
        record.plan({"c9": "rollout"})


class Worker:
    def __init__(self, name: str):
        self.name, self.done = name, []

    @register(DispatchMode.STREAM)
    async def work(self, items: list[int]) -> list[int]:
        await asyncio.sleep(0.02)
        self.done += items
        return items

    @register(DispatchMode.ONE_TO_ALL)
    async def who(self) -> str:
        return self.name


def test_groups_backed_by_the_record_follow_it_and_a_stream_follows_them():
    record = Membership(["a", "b"])
    workers = {"a": Worker("a"), "b": Worker("b")}
    train = WorkerGroup("train", Worker, membership=record, handles=workers)
    rollout = WorkerGroup("rollout", Worker, membership=record, handles=workers)
    record.move({"a": "train", "b": "rollout"})
    versions = []
    record.subscribe(versions.append)

    async def main():
        assert await train.who() == ["a"] and await rollout.who() == ["b"]
        stream = train.work(list(range(20)))
        await asyncio.sleep(0.05)
        record.plan({"b": "train"})
        record.leave(["b"])
        record.enter(["b"])  # joins the running stream at once
        await asyncio.sleep(0.05)
        record.plan({"a": "rollout"})
        record.leave(["a"])  # leaves it: finishes what it holds, takes nothing more
        await train.release(["a"])
        held_by_a = len(workers["a"].done)
        result = await stream
        return result, held_by_a

    result, held_by_a = asyncio.run(main())
    assert sorted(result) == list(range(20))  # every item done exactly once
    assert len(workers["a"].done) == held_by_a and workers["b"].done and workers["a"].done
    assert versions == [record.version - 2, record.version - 1, record.version]
    with pytest.raises(RuntimeError, match="follows a membership record"):
        train.add(Worker("c"), "c")
