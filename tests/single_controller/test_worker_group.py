"""WorkerGroup over real Ray actors: fan-out, dispatch, membership changes mid-call."""

from __future__ import annotations

import time

import pytest
import ray

from gyre.single_controller.worker_group import WorkerGroup, split_evenly


@ray.remote(num_cpus=0)
class Echo:
    def __init__(self, name: str):
        self.name = name

    def who(self) -> str:
        return self.name

    def slow(self, seconds: float) -> str:
        time.sleep(seconds)
        return self.name

    def double(self, items: list[int]) -> list[tuple[str, int]]:
        return [(self.name, 2 * x) for x in items]


@pytest.fixture
def actors(ray_session):
    made = [Echo.remote(f"w{i}") for i in range(3)]
    yield made
    for actor in made:
        ray.kill(actor)


def test_fan_out_and_dispatch_split(actors):
    group = WorkerGroup("g", actors)
    assert sorted(group.call("who")) == ["w0", "w1", "w2"]
    results = group.dispatch_split("double", list(range(7)))
    assert [value for _, value in results] == [2 * x for x in range(7)]
    assert [name for name, _ in results] == ["w0"] * 3 + ["w1"] * 2 + ["w2"] * 2


def test_members_added_and_removed_mid_call_keep_results(actors):
    group = WorkerGroup("g", actors[:2])
    refs = group.slow(0.5)  # in flight on w0 and w1
    removed = group.remove(actors[0])
    group.add(actors[2])
    assert ray.get(refs) == ["w0", "w1"]  # the removed member's call completes and is not lost
    assert sorted(group.call("who")) == ["w1", "w2"]
    assert removed is actors[0] and actors[0] not in group and len(group) == 2
    version = group.version
    group.add(actors[0])
    assert group.version == version + 1


def test_membership_errors_are_clear(actors):
    group = WorkerGroup("trainer", actors[:1])
    with pytest.raises(ValueError, match="already a member"):
        group.add(actors[0])
    with pytest.raises(KeyError, match="is not a member"):
        group.remove(actors[1])
    with pytest.raises(RuntimeError, match="no members"):
        WorkerGroup("empty").dispatch_split("double", [1])


def test_split_evenly():
    assert split_evenly(list(range(5)), 3) == [[0, 1], [2, 3], [4]]
    assert split_evenly([], 2) == [[], []]
