"""The single controller as its users rely on it: ``group.method(...)`` dispatched and collected as the worker
class declares (``@register``), over real Ray actors and over local members (a group of groups), with
membership changing while calls are in flight, and ``STREAM`` calls that hand items to whichever member is
free."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
import ray

from gyre.single_controller import Collect, DispatchMode, GroupCall, StreamCall, WorkerGroup, register, split_evenly


class Worker:
    """The plain class (``mode_of`` reads its methods); ``Actor`` is its Ray actor class."""

    def __init__(self, name: str):
        self.name = name
        self.reset()

    def reset(self, delay: float = 0.0) -> None:
        self.delay, self.log, self.steps = delay, [], 0

    def calls(self) -> list[tuple]:
        return list(self.log)

    def steps_taken(self) -> int:
        return self.steps

    def unregistered(self) -> str:
        return self.name

    @register(DispatchMode.ONE_TO_ALL)
    def who(self, suffix: str = "") -> str:
        self.log.append(("who", suffix))
        return self.name + suffix

    @register(DispatchMode.ONE_TO_ALL)
    def slow(self, seconds: float) -> str:
        self.log.append(("slow", seconds))
        time.sleep(seconds)
        return self.name

    @register(DispatchMode.SPLIT)
    def double(self, items: list[int], factor: int = 2) -> list[tuple[str, int]]:
        self.log.append(("double", list(items), factor))
        return [(self.name, factor * x) for x in items]

    @register(DispatchMode.SPLIT, Collect.ALL)
    def parts(self, items: list[int]) -> list[int]:
        return list(items)

    @register(DispatchMode.PER_MEMBER)
    def pair(self, a, b, sep: str = "-") -> str:
        self.log.append(("pair", a, b))
        return f"{self.name}:{a}{sep}{b}"

    @register(DispatchMode.RANK_ZERO)
    def step(self, n: int) -> tuple[str, int]:
        self.steps += n
        return self.name, self.steps

    @register(DispatchMode.ONE_TO_ALL, Collect.FIRST)
    def same(self) -> str:
        return self.name

    @register(DispatchMode.ONE_TO_ALL, Collect.CONCAT)
    def listed(self) -> list[str]:
        return [self.name, self.name.upper()]

    @register(DispatchMode.STREAM)
    def work(self, items: list[int]) -> list[tuple[str, int]]:
        self.log.append(("work", list(items)))
        time.sleep(self.delay)
        if any(x < 0 for x in items):
            raise ValueError(f"{self.name} refuses {items}")
        return [(self.name, x) for x in items]


# Ray workers cannot import this test module by name: send its classes by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
Actor = ray.remote(num_cpus=0)(Worker)


class Local:
    """A local member whose methods are coroutines: holds items until it finishes them."""

    def __init__(self, name: str, delay: float = 0.0, stream_width: int = 1):
        self.name, self.delay, self.stream_width = name, delay, stream_width
        self.taken: list[list[int]] = []
        self.finished: list[int] = []
        self.gate: asyncio.Event | None = None  # when set, each take waits for it

    @register(DispatchMode.STREAM)
    async def work(self, items: list[int]) -> list[tuple[str, int]]:
        self.taken.append(list(items))
        await asyncio.sleep(self.delay)
        if self.gate is not None:
            await self.gate.wait()
        if any(x < 0 for x in items):
            raise ValueError(f"{self.name} refuses {items}")
        self.finished.extend(items)
        return [(self.name, x) for x in items]

    @register(DispatchMode.ONE_TO_ALL)
    async def who(self) -> str:
        await asyncio.sleep(0.01)
        return self.name

    @register(DispatchMode.SPLIT)
    def plain(self, items: list[int]) -> list[str]:  # not a coroutine: its result is awaited all the same
        return [f"{self.name}{x}" for x in items]


class Pair:
    """Like a Cell: a local object whose methods return GroupCalls over its rank actors."""

    def __init__(self, name: str, actors: list):
        self.ranks = WorkerGroup(f"{name}/ranks", Worker, actors)
        self.stream_width = len(actors)

    @register(DispatchMode.STREAM)
    def work(self, items: list[int]) -> GroupCall:
        return self.ranks.double(items, factor=10)

    @register(DispatchMode.RANK_ZERO)
    def step(self, n: int) -> GroupCall:
        return self.ranks.step(n)


@pytest.fixture(scope="module")
def pool(ray_session):
    made = [Actor.remote(f"w{i}") for i in range(3)]
    ray.get([actor.reset.remote() for actor in made])
    yield made
    for actor in made:
        ray.kill(actor)


@pytest.fixture
def actors(pool):
    ray.get([actor.reset.remote() for actor in pool])
    return pool


def logs(actors) -> list[list[tuple]]:
    return ray.get([actor.calls.remote() for actor in actors])


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=10))


async def until(condition, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


async def group_work(group: WorkerGroup, items: list[int]) -> list:
    return await group.work(items)


# Dispatch modes -------------------------------------------------------------------------------------


def test_one_to_all_same_arguments_results_in_member_order(actors):
    group = WorkerGroup("g", Worker, actors[1::-1])
    assert group.who("!").get() == ["w1!", "w0!"]
    assert logs(actors) == [[("who", "!")], [("who", "!")], []]  # w2 is no member


def test_split_contiguous_parts_and_empty_part_still_called(actors):
    group = WorkerGroup("g", Worker, actors[:3])
    result = group.double(list(range(7)), factor=3).get()
    assert result == [("w0", 0), ("w0", 3), ("w0", 6), ("w1", 9), ("w1", 12), ("w2", 15), ("w2", 18)]
    assert [log[0] for log in logs(actors[:3])] == [
        ("double", [0, 1, 2], 3), ("double", [3, 4], 3), ("double", [5, 6], 3)]

    ray.get([actor.reset.remote() for actor in actors])
    assert group.double([5, 6]).get() == [("w0", 10), ("w1", 12)]
    assert logs(actors[:3]) == [[("double", [5], 2)], [("double", [6], 2)], [("double", [], 2)]]


def test_split_with_collect_all_keeps_the_parts(actors):
    group = WorkerGroup("g", Worker, actors[:3])
    assert group.parts(list(range(5))).get() == [[0, 1], [2, 3], [4]]
    assert group.parts([]).get() == [[], [], []]


def test_per_member_entry_each_and_wrong_length_names_the_count(actors):
    group = WorkerGroup("g", Worker, actors[:3])
    assert group.pair(["a", "b", "c"], [1, 2, 3], sep="+").get() == ["w0:a+1", "w1:b+2", "w2:c+3"]

    ray.get([actor.reset.remote() for actor in actors])
    with pytest.raises(ValueError, match=r"one entry per member \(3\), got 2"):
        group.pair(["a", "b"], [1, 2, 3])
    with pytest.raises(ValueError, match=r"one entry per member \(3\), got 4"):
        group.pair(["a", "b", "c"], [1, 2, 3, 4])
    assert logs(actors[:3]) == [[], [], []]  # nothing was issued


def test_rank_zero_only_first_member_runs(actors):
    group = WorkerGroup("g", Worker, actors[:3])
    assert group.step(5).get() == ("w0", 5)
    assert group.step(2).get() == ("w0", 7)
    assert ray.get([actor.steps_taken.remote() for actor in actors[:3]]) == [7, 0, 0]


def test_collect_first_and_concat(actors):
    group = WorkerGroup("g", Worker, actors[1:3])
    assert group.same().get() == "w1"
    assert group.listed().get() == ["w1", "W1", "w2", "W2"]


def test_await_inside_a_loop(actors):
    group = WorkerGroup("g", Worker, actors[:2])

    async def main():
        call = group.double([1, 2, 3])
        assert isinstance(call, GroupCall)
        return await call, await group.who(), await group.step(1)

    assert run(main()) == ([("w0", 2), ("w0", 4), ("w1", 6)], ["w0", "w1"], ("w0", 1))


def test_members_given_as_mapping_keep_their_ids(actors):
    group = WorkerGroup("g", Worker, {"b": actors[1], "a": actors[0]})
    assert group.ids == ["b", "a"] and "a" in group and actors[0] not in group
    assert group.who().get() == ["w1", "w0"]
    assert group.remove("a") is actors[0]
    assert group.ids == ["b"] and len(group) == 1


# Errors -----------------------------------------------------------------------------------------------


def test_unregistered_and_unknown_methods(actors):
    group = WorkerGroup("g", Worker, actors[:1])
    with pytest.raises(AttributeError, match=r"Worker\.unregistered declares no dispatch mode"):
        group.unregistered()
    with pytest.raises(AttributeError, match=r"no method 'nope'"):
        group.nope()
    assert not hasattr(group, "nope")
    assert logs(actors[:1]) == [[]]


def test_call_on_empty_group(actors):
    with pytest.raises(RuntimeError, match="no members"):
        WorkerGroup("empty", Worker).who()
    group = WorkerGroup("g", Worker, actors[:1])
    group.remove(actors[0])
    with pytest.raises(RuntimeError, match="'g' has no members to call double"):
        group.double([1, 2])


def test_membership_errors_and_version(actors):
    group = WorkerGroup("trainer", Worker, actors[:2])
    assert group.version == 2
    with pytest.raises(ValueError, match="already a member"):
        group.add(actors[0])
    group.add(actors[2], "x")
    with pytest.raises(ValueError, match="'trainer': x is already a member"):
        group.add(actors[2], "x")
    assert group.version == 3 and len(group) == 3  # the failed add changed nothing
    with pytest.raises(KeyError, match="is not a member"):
        group.remove(actors[2])  # it is a member under the id "x", not its actor id
    with pytest.raises(KeyError, match="nobody is not a member"):
        group.remove("nobody")
    assert group.version == 3
    assert group.remove("x") is actors[2]
    assert group.version == 4
    group.add(actors[2])
    assert group.version == 5
    assert group.ids == [WorkerGroup.member_id(a) for a in actors]


# Membership changes during an in-flight call -----------------------------------------------------


def test_removed_member_result_kept_added_member_not_called(actors):
    group = WorkerGroup("g", Worker, actors[:2])
    call = group.slow(0.3)  # in flight on w0 and w1
    assert group.remove(actors[0]) is actors[0]
    group.add(actors[2])
    assert call.get() == ["w0", "w1"]  # the removed member's call completes and is not lost
    assert logs(actors[:3]) == [[("slow", 0.3)], [("slow", 0.3)], []]  # w2 was not called
    assert group.who().get() == ["w1", "w2"]


def test_removed_member_result_kept_when_awaited(actors):
    group = WorkerGroup("g", Worker, actors[:2])

    async def main():
        call = group.slow(0.2)
        group.remove(actors[1])
        group.add(actors[2])
        return await call

    assert run(main()) == ["w0", "w1"]
    assert [len(log) for log in logs(actors)] == [1, 1, 0]


# A group of groups ------------------------------------------------------------------------------------


def test_group_of_groups(actors):
    inner = {"a": WorkerGroup("a", Worker, actors[:2]), "b": WorkerGroup("b", Worker, actors[2:3])}
    outer = WorkerGroup("outer", Worker, inner)

    async def main():
        return await outer.double(list(range(5))), await outer.who(), await outer.step(4)

    doubled, who, step = run(main())
    # outer split: a gets [0, 1, 2], b gets [3, 4]; a splits again into [0, 1] and [2]
    assert doubled == [("w0", 0), ("w0", 2), ("w1", 4), ("w2", 6), ("w2", 8)]
    assert who == [["w0", "w1"], ["w2"]]
    assert step == ("w0", 4)  # only a, and within a only w0
    assert ray.get([actor.steps_taken.remote() for actor in actors[:3]]) == [4, 0, 0]


def test_local_members_sync_and_async_methods():
    group = WorkerGroup("locals", Local, {"x": Local("x"), "y": Local("y")})

    async def main():
        return await group.who(), await group.plain([1, 2, 3])

    assert run(main()) == (["x", "y"], ["x1", "x2", "y3"])


def test_cells_like_members_stream_with_their_width(actors):
    cells = {"c0": Pair("c0", actors[:2]), "c1": Pair("c1", actors[2:])}
    trainer = WorkerGroup("trainer", Pair, cells)

    async def main():
        stream = trainer.work(list(range(9)))
        assert isinstance(stream, StreamCall)
        return await stream, stream.done_by

    results, done_by = run(main())
    assert sorted(value for _, value in results) == [10 * x for x in range(9)]
    assert sum(done_by.values()) == 9 and set(done_by) == {"c0", "c1"}
    rank_logs = logs(actors)
    assert len(rank_logs[0]) == len(rank_logs[1])  # every take of c0 calls both its ranks
    assert sum(len(entry[1]) for log in rank_logs[:2] for entry in log) == done_by["c0"]
    assert all(entry[2] == 10 for log in rank_logs for entry in log)  # the cell's own arguments reached the ranks
    takes = [entry[1] for log in rank_logs for entry in log]
    assert all(len(part) <= 1 for part in takes)  # c0 takes 2 items at once, split across its 2 ranks
    assert sorted(x for part in takes for x in part) == list(range(9))


# STREAM ----------------------------------------------------------------------------------------------


def test_stream_slow_ray_member_takes_fewer(actors):
    ray.get(actors[1].reset.remote(delay=0.3))
    group = WorkerGroup("g", Worker, actors[:2])
    fast, slow = (WorkerGroup.member_id(a) for a in actors[:2])

    async def main():
        stream = group.work(list(range(10)))
        return await stream, stream.done_by

    results, done_by = run(main())
    assert sorted(x for _, x in results) == list(range(10))
    assert done_by[slow] < done_by[fast] and done_by[slow] <= 2
    assert done_by[fast] + done_by[slow] == 10
    fast_log, slow_log = logs(actors[:2])
    assert all(len(items) == 1 for _, items in fast_log + slow_log)  # Ray members: width 1
    assert sorted(x for _, items in fast_log + slow_log for x in items) == list(range(10))


def test_stream_slow_local_member_takes_fewer():
    fast, slow = Local("fast"), Local("slow", delay=0.25)
    group = WorkerGroup("g", Local, {"fast": fast, "slow": slow})

    async def main():
        stream = group.work(list(range(12)))
        return await stream, stream.done_by

    results, done_by = run(main())
    assert slow.taken == [[1]]  # the first free turn: fast took 0, slow took 1
    assert done_by == {"fast": 11, "slow": 1}
    assert sorted(x for _, x in results) == list(range(12))


def test_stream_width_takes_that_many_items_at_once():
    wide, narrow = Local("wide", delay=0.05, stream_width=3), Local("narrow", delay=0.05)
    group = WorkerGroup("g", Local, {"wide": wide, "narrow": narrow})

    results = run(group_work(group, list(range(8))))
    assert wide.taken[0] == [0, 1, 2] and narrow.taken[0] == [3]
    assert all(len(part) == 3 for part in wide.taken[:-1]) and 1 <= len(wide.taken[-1]) <= 3
    assert all(len(part) == 1 for part in narrow.taken)
    assert all(part == list(range(part[0], part[0] + len(part))) for part in wide.taken)  # contiguous
    assert sorted(wide.finished + narrow.finished) == list(range(8))
    assert sorted(x for _, x in results) == list(range(8))

    alone = Local("alone", stream_width=3)
    run(group_work(WorkerGroup("g", Local, {"alone": alone}), list(range(7))))
    assert alone.taken == [[0, 1, 2], [3, 4, 5], [6]]


def test_stream_member_added_mid_stream_takes_items():
    first, late = Local("first"), Local("late", delay=0.005)
    group = WorkerGroup("g", Local, {"first": first})

    async def main():
        first.gate = asyncio.Event()  # first holds item 0 until the gate opens
        stream = group.work(list(range(12)))
        await asyncio.sleep(0.05)
        assert first.taken == [[0]] and late.taken == [] and stream.left == 12
        group.add(late, "late")
        await until(lambda: stream.left == 1)  # late does the rest while first still holds item 0
        assert late.finished == list(range(1, 12)) and first.finished == [] and not stream.done
        first.gate.set()
        return await stream, stream.done_by

    results, done_by = run(main())
    assert late.taken == [[x] for x in range(1, 12)] and first.taken == [[0]]
    assert done_by == {"first": 1, "late": 11}
    assert sorted(first.finished + late.finished) == list(range(12))  # each item exactly once
    assert sorted(x for _, x in results) == list(range(12))


def test_stream_member_removed_finishes_held_items_and_takes_no_more():
    keep, leave = Local("keep", delay=0.02), Local("leave", stream_width=2)
    group = WorkerGroup("g", Local, {"keep": keep, "leave": leave})

    async def main():
        leave.gate = asyncio.Event()
        stream = group.work(list(range(10)))
        await asyncio.sleep(0.01)
        assert leave.taken == [[1, 2]] and leave.finished == []
        group.remove("leave")
        release = asyncio.ensure_future(group.release(["leave"]))
        await asyncio.sleep(0.1)
        assert not release.done()  # leave still holds its items
        assert leave.finished == [] and len(keep.taken) >= 3  # the others kept going
        leave.gate.set()
        await release
        assert leave.finished == [1, 2]  # release returned after its held items finished
        results = await stream
        return results, stream.done_by

    results, done_by = run(main())
    assert leave.taken == [[1, 2]]  # no more after it left
    assert done_by == {"keep": 8, "leave": 2}
    assert sorted(keep.finished + leave.finished) == list(range(10))
    assert sorted(x for _, x in results) == list(range(10))
    assert ("leave", 1) in results and ("leave", 2) in results  # its results are kept


def test_release_of_member_holding_nothing_returns_at_once():
    idle = Local("idle")
    group = WorkerGroup("g", Local, {"idle": idle})

    async def main():
        await group.release(["idle"])  # no stream running
        stream = group.work([1, 2, 3])
        await stream
        group.remove("idle")
        await asyncio.wait_for(group.release(["idle"]), 0.5)
        return stream.done_by

    assert run(main()) == {"idle": 3}


def test_stream_failing_local_member_fails_the_call_and_leaves_no_work_running():
    good, bad = Local("good", delay=0.05), Local("bad", delay=0.01)
    group = WorkerGroup("g", Local, {"good": good, "bad": bad})
    calls = []

    async def main():
        call = group.work([0, -1, 2, 3, 4, 5])
        calls.append(call)
        await call

    with pytest.raises(ValueError, match=r"refuses \[-1\]"):
        run(main())
    # the other member's take in flight when the failure came ended before the call did; nothing more was handed out
    assert good.finished == [0] and calls[0].left == 0 and not calls[0].inflight


def test_stream_call_without_items_is_a_clear_error():
    group = WorkerGroup("g", Local, {"a": Local("a")})
    with pytest.raises(TypeError, match="needs its list of items"):
        group.work()
    with pytest.raises(ValueError, match="STREAM call joins"):
        register(DispatchMode.STREAM, Collect.ALL)


def test_stream_failing_ray_member_fails_the_call(actors):
    group = WorkerGroup("g", Worker, actors[:2])

    async def main():
        await group.work([0, -1, 2, 3])

    with pytest.raises(ValueError, match=r"w1 refuses \[-1\]"):
        run(main())


# split_evenly -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("items, parts, expected", [
    (list(range(5)), 3, [[0, 1], [2, 3], [4]]),
    (list(range(6)), 3, [[0, 1], [2, 3], [4, 5]]),
    (list(range(10)), 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
    (list(range(2)), 3, [[0], [1], []]),
    ([], 2, [[], []]),
    ((7, 8, 9), 1, [[7, 8, 9]]),
    ("abcde", 2, [["a", "b", "c"], ["d", "e"]]),
])
def test_split_evenly(items, parts, expected):
    assert split_evenly(items, parts) == expected


def test_an_open_ended_stream_takes_items_put_later_and_ends_only_once_closed():
    a, b = Local("a", delay=0.01), Local("b", delay=0.01)
    group = WorkerGroup("g", Local, {"a": a, "b": b})

    async def main():
        stream = group.stream("work", [0, 1])
        await until(lambda: stream.left == 0)  # what it was given is done, and it is still open
        await asyncio.sleep(0.05)
        assert not stream.done and stream.total == 2
        stream.put([2, 3, 4])
        await until(lambda: stream.left == 0)
        assert not stream.done and stream.total == 5
        stream.put([5])
        stream.close()
        results = await stream
        with pytest.raises(RuntimeError, match="closed"):
            stream.put([6])
        return results, stream.done_by

    results, done_by = run(main())
    assert sorted(x for _, x in results) == list(range(6))  # each item once, early or late
    assert sum(done_by.values()) == 6
    assert sorted(a.finished + b.finished) == list(range(6))
    with pytest.raises(RuntimeError, match="not opened with open_ended"):
        run(_put_on_a_closed_call(group))
    with pytest.raises(TypeError, match="who is not registered as a STREAM call"):
        group.stream("who", [1])


async def _put_on_a_closed_call(group):
    stream = group.work([0])
    stream.put([1])


def test_a_stream_member_whose_process_dies_has_its_items_redone_by_the_others(ray_session):
    """A member killed mid-call: every item it took since it joined (done or held) goes back to the queue and
    its results are dropped, so each item's result comes once, from a live member; other errors still fail."""
    from ray.exceptions import RayActorError

    workers = [Actor.remote(f"d{i}") for i in range(3)]
    ray.get([worker.reset.remote(0.05) for worker in workers])
    died = lambda member_id, error: isinstance(error, RayActorError)  # noqa: E731
    group = WorkerGroup("g", Worker, {f"d{i}": w for i, w in enumerate(workers)}, lost=died)

    async def main():
        stream = group.stream("work", list(range(30)))
        await until(lambda: stream.done_by.get("d2", 0) >= 2, timeout=5)
        ray.kill(workers[2])
        stream.close()
        return await stream, stream

    results, stream = run(main())
    assert sorted(x for _, x in results) == list(range(30))  # each item once
    assert {name for name, _ in results} <= {"d0", "d1"}  # nothing of the dead member's counts
    assert stream.lost_members == ["d2"] and stream.redone >= 2
    assert sum(stream.done_by.values()) == 30 and stream.done_by["d2"] == 0

    async def refused():  # an error that is not a lost member fails the call as before
        stream = group.stream("work", [0, -1, 2])
        stream.close()
        await stream

    with pytest.raises(ValueError, match="refuses"):
        run(refused())
    for worker in workers[:2]:
        ray.kill(worker)
