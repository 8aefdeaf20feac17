"""The router's park decision: a session whose history shows long tool gaps is parked on its engine when its
call returns, one with short gaps is not; a drain parks the sessions it moves; parking changes no output."""

from __future__ import annotations

import asyncio

import pytest
import torch

from gyre.proxy.config import ParkingConfig, ProxyConfig
from gyre.proxy.router import Occupancy, RoutedCell, Router
from gyre.rollout.base import Generation, SamplingParams
from gyre.rollout.hf import HFEngine
from gyre.rollout.scripted import ScriptedEngine

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=8)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


class ParkRecorder:
    """An engine that answers at once and records which sessions it was asked to park."""

    max_context = 1024

    def __init__(self) -> None:
        self.parked: list[str] = []

    async def generate(self, session_id, prompt_ids, sampling) -> Generation:
        return Generation([5, 6], [0.0, 0.0], "stop", 0)

    async def park(self, session_id: str) -> bool:
        self.parked.append(session_id)
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def calls_with_gaps(router: Router, clock: Clock, session_id: str, gaps: list[float]) -> None:
    """One call, then one more after each gap (the agent's tool time, on the router's clock)."""
    await router.generate("e", session_id, [1, 2, 3], GREEDY)
    for gap in gaps:
        await router.settle_parking()
        clock.now += gap
        await router.generate("e", session_id, [1, 2, 3], GREEDY)
    await router.settle_parking()


def parking_router(engine, **parking) -> tuple[Router, Clock]:
    settings = {"restore_s": 1.0, "restore_s_per_1k_tokens": 0.0, "prior_s": 0.0, **parking}
    router = Router([RoutedCell("c0", engine)], parking=ParkingConfig(**settings))  # type: ignore[arg-type]
    clock = Clock()
    router.clock = clock
    return router, clock


def test_long_tool_gaps_park_and_short_ones_do_not():
    async def main():
        engine = ParkRecorder()
        router, clock = parking_router(engine)
        await calls_with_gaps(router, clock, "e/long", [5.0, 4.0, 6.0])
        await calls_with_gaps(router, clock, "e/short", [0.2, 0.1, 0.3])
        assert engine.parked == ["e/long"] * 3  # not after the first call: no gap yet and a prior of 0
        assert router.counters["parks"] == 3 and router.counters["parks_skipped"] == 5
        assert router.stats()["parked"] == 1  # e/long, until its next call
        await router.generate("e", "e/long", [1, 2, 3], GREEDY)
        assert router.stats()["parked"] == 0
        await router.settle_parking()

        # The rule is the mean of the last `window` gaps against the restore cost, which grows with context.
        engine = ParkRecorder()
        router, clock = parking_router(engine, window=2, restore_s_per_1k_tokens=1000.0)
        await calls_with_gaps(router, clock, "e/long", [5.0, 4.0])
        assert engine.parked == []  # 3 prompt + 2 response tokens cost 5 s + 1 s to restore: more than the gap
        engine = ParkRecorder()
        router, clock = parking_router(engine, window=2)
        await calls_with_gaps(router, clock, "e/mixed", [5.0, 0.1, 0.1])  # means 5, 2.55, 0.1
        assert engine.parked == ["e/mixed", "e/mixed"]

        # Before a session has a gap, the prior decides: the mean gap of all sessions so far (prior_s: null).
        engine = ParkRecorder()
        router, clock = parking_router(engine, prior_s=None)
        await calls_with_gaps(router, clock, "e/a", [3.0])
        await calls_with_gaps(router, clock, "e/b", [])
        assert engine.parked == ["e/a", "e/b"]

        # An engine that cannot park (scripted) answers False: counted, nothing else changes.
        scripted = ScriptedEngine()
        scripted.add_script("e", [[5], [6]])
        router, clock = parking_router(scripted)
        await calls_with_gaps(router, clock, "e/long", [5.0])
        assert router.counters["parks_refused"] == 1 and router.counters["parks"] == 0 and router.stats()["parked"] == 0

        # Off: nobody is asked to park.
        engine = ParkRecorder()
        router, clock = parking_router(engine, enabled=False)
        await calls_with_gaps(router, clock, "e/long", [5.0, 4.0])
        assert engine.parked == [] and router.counters["parks_skipped"] == 0

    asyncio.run(main())


class HeldEngine(ParkRecorder):
    """Answers a call only while ``answering`` is set: a call can be caught running."""

    def __init__(self) -> None:
        super().__init__()
        self.answering = asyncio.Event()
        self.answering.set()

    async def generate(self, session_id, prompt_ids, sampling) -> Generation:
        await self.answering.wait()
        return await super().generate(session_id, prompt_ids, sampling)


def test_a_parked_gap_counts_in_the_slot_share_as_soon_as_the_next_call_starts():
    """A step's metrics read the router while calls run (the async scheduler's rollouts go on through a step):
    the seconds sessions spent parked (``parked_s``) and the share of time they held a slot must agree then. A
    gap entered the slot share only once its next call ended: a step could log parked seconds and a share of 1."""
    async def main():
        engine = HeldEngine()
        router, clock = parking_router(engine)
        await calls_with_gaps(router, clock, "e/long", [5.0, 4.0])  # parked after its 2nd call on
        engine.answering.clear()
        clock.now += 6.0
        call = asyncio.create_task(router.generate("e", "e/long", [1, 2, 3], GREEDY))
        await asyncio.sleep(0)  # the call has started: its gap is over
        during = router.occupancy()
        engine.answering.set()
        await call
        return during

    during = asyncio.run(main())
    assert during.parked_s == pytest.approx(4.0 + 6.0)
    assert during.slot_share == pytest.approx(5.0 / (5.0 + 4.0 + 6.0))  # calls take no time on this clock


def test_occupancy_counts_the_slots_sessions_hold_and_the_time_they_hold_them():
    """What the scheduler sees (``Cluster.views``/``parking``): a session in a tool it was parked for holds no
    slot, its cell counts only the others; the slot share is the held seconds (calls, gaps not parked) over
    the lived ones; replicas' views add up."""
    async def main():
        engine = ParkRecorder()
        router, clock = parking_router(engine)
        await calls_with_gaps(router, clock, "e/long", [5.0, 4.0, 6.0])  # parked after its 2nd call on
        await calls_with_gaps(router, clock, "e/short", [0.2, 0.1, 0.3])  # never parked
        parked_now = router.occupancy()
        await router.generate("e", "e/long", [1, 2, 3], GREEDY)  # back from its tool: holds a slot again
        clock.now += 1.0
        await router.generate("f", "f/main", [1, 2, 3], GREEDY)
        return parked_now, router.occupancy()

    parked_now, later = asyncio.run(main())
    assert parked_now.active == {"c0": 1} and parked_now.parked == 1
    # gaps 5 (before any park), 4 and 6 (parked), 0.2, 0.1, 0.3: calls take no time on this clock
    assert parked_now.slot_share == pytest.approx((5.0 + 0.6) / 15.6)
    assert later.active == {"c0": 3} and later.parked == 0
    merged = Occupancy.merged([parked_now, later])
    assert merged.active == {"c0": 4} and merged.parked == 1
    assert Occupancy().slot_share == 1.0  # nothing measured yet: every session holds its slot

    async def off():
        router, clock = parking_router(ParkRecorder(), enabled=False)
        await calls_with_gaps(router, clock, "e/long", [5.0, 4.0])
        return router.occupancy()

    assert asyncio.run(off()).slot_share == 1.0


def test_proxy_config_turns_parking_on_and_checks_its_keys():
    assert ProxyConfig().parking.enabled and ProxyConfig.from_mapping({"parking": {"window": 2}}).parking.window == 2
    with pytest.raises(ValueError, match=r"parking\.windw"):
        ProxyConfig.from_mapping({"parking": {"windw": 2}})
    with pytest.raises(ValueError, match=r"parking\.window=0"):
        ProxyConfig(parking={"window": 0})
    assert Router().parking.enabled is False  # a bare router parks nothing; the proxy sets proxy.parking


def prompt(length: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(16, 2000, (length,), generator=generator).tolist()


def test_router_parks_on_a_real_engine_without_changing_outputs(tiny_model_path):
    """Two sessions on an HFEngine, one with long tool gaps, one with short: only the first is parked (the
    engine counts it) and each call returns exactly what it returns with parking off."""

    async def session_turns(router: Router, clock: Clock) -> list[list[int]]:
        outs = []
        for session_id, context, gap in (("e/long", prompt(30, seed=1), 5.0), ("e/short", prompt(25, seed=2), 0.1)):
            for turn in range(3):
                clock.now += gap  # the agent's tool time before this call
                routed = await router.generate("e", session_id, context, GREEDY)
                await router.settle_parking()
                outs.append(routed.generation.response_ids)
                context = context + routed.generation.response_ids + prompt(4, seed=10 + turn)
        return outs

    results = {}
    for enabled in (False, True):
        engine = HFEngine(tiny_model_path)
        router, clock = parking_router(engine, enabled=enabled, restore_s=1.0)
        try:
            results[enabled] = asyncio.run(session_turns(router, clock)), engine.stats(), router.counters
        finally:
            asyncio.run(engine.close())
    (plain, plain_stats, _), (parked, stats, counters) = results[False], results[True]
    assert parked == plain and plain_stats["parks"] == 0
    # e/long has a 5 s gap before its 2nd and 3rd calls: parked after them, restored by the 3rd.
    assert stats["parks"] == 2 and stats["restores"] == 1 and stats["parked_sessions"] == 1
    assert counters["parks"] == 2 and counters["parks_skipped"] == 4  # both first calls, e/short's later ones


def test_a_drain_parks_the_sessions_it_moves(tiny_model_path):
    """A session parked on a cell that drains (e.g. chosen to train): its KV is exported from host memory,
    imported on the new cell and parked there; its next call there restores it."""

    async def main():
        engines = [HFEngine(tiny_model_path, engine_id=f"hf-{i}") for i in range(2)]
        router = Router([RoutedCell(f"c{i}", engine) for i, engine in enumerate(engines)], parking=ParkingConfig(prior_s=0.0))
        try:
            first = await router.generate("e", "e/main", prompt(30, seed=3), GREEDY)
            source = router.cell_of("e")
            assert await router.cells[source].engine.park("e/main")  # parked where it ran: its KV still moves
            report = await router.drain(source)
            dest = router.cells[router.cell_of("e")]
            assert report.kv_imports == 1 and report.parked == 1
            assert dest.engine.stats()["parked_sessions"] == 1 and dest.engine.stats()["cached_sessions"] == 0
            again = await router.generate("e", "e/main", prompt(30, seed=3) + first.generation.response_ids + [20], GREEDY)
            await router.settle_parking()
            return again, dest.engine.stats()
        finally:
            for engine in engines:
                await engine.close()

    again, stats = asyncio.run(main())
    assert stats["restores"] == 1 and again.generation.cached_tokens > 0


def test_an_ended_execution_frees_its_caches_parked_or_not(tiny_model_path):
    """Releasing an execution (its harness ended) frees what the engine holds for its sessions: a parked
    cache on host and a live one in the budget; another execution's cache stays."""

    async def main():
        engine = HFEngine(tiny_model_path)
        router = Router([RoutedCell("c0", engine)], parking=ParkingConfig(prior_s=0.0))
        try:
            for execution_id, session_id in (("e", "e/main"), ("e", "e/sub"), ("other", "other/main")):
                await router.generate(execution_id, session_id, prompt(30, seed=len(session_id)), GREEDY)
            assert await engine.park("e/sub")
            held = engine.stats()
            router.release("e")
            await router.settle_parking()
            return held, engine.stats(), await engine.export_session("other/main")
        finally:
            await engine.close()

    held, freed, other = asyncio.run(main())
    assert (held["cached_sessions"], held["parked_sessions"]) == (2, 1)
    assert (freed["cached_sessions"], freed["parked_sessions"], freed["parked_bytes"]) == (1, 0, 0)
    assert other is not None and len(other.tokens) > 30


def test_a_parked_execution_moves_to_a_cell_with_room_when_its_own_is_full(tiny_model_path):
    """Its sessions all parked, an execution is not tied to its cell: when its next call finds that cell
    full, the call runs on a cell with room, its parked KV moved there and restored, with the output it
    would have had unparked."""
    long_call = SamplingParams(temperature=0.0, max_new_tokens=400)  # no stop token: c0 stays full a while

    async def main():
        engines = [HFEngine(tiny_model_path, engine_id=f"hf-{i}") for i in range(2)]
        cells = [RoutedCell("c0", engines[0], capacity=1), RoutedCell("c1", engines[1], capacity=1, draining=True)]
        router = Router(cells, parking=ParkingConfig(restore_s=0.001, restore_s_per_1k_tokens=0.0, prior_s=0.0))
        clock = Clock()
        router.clock = clock
        try:
            context = prompt(30, seed=5)
            turns = []
            for turn in range(2):  # the second call follows a 5 s tool gap: parked after it
                clock.now += 5.0
                routed = await router.generate("e", "e/main", context, GREEDY)
                turns.append(routed.generation.response_ids)
                context = context + routed.generation.response_ids + prompt(4, seed=20 + turn)
                await router.settle_parking()
            await router.generate("f", "f/main", prompt(12, seed=6), GREEDY)  # f on c0 too (c1 is draining)
            assert router.stats()["parked"] == 1 and router.cell_of("e") == router.cell_of("f") == "c0"
            router.undrain("c1")
            busy = asyncio.ensure_future(router.generate("f", "f/main", prompt(12, seed=6), long_call))
            while cells[0].inflight == 0:
                await asyncio.sleep(0.001)
            clock.now += 5.0
            moved = await router.generate("e", "e/main", context, GREEDY)  # c0 is full: e goes to c1
            full_while_moving = not busy.done()
            await busy
            await router.settle_parking()
            return turns, context, moved, full_while_moving, router.counters, engines[1].stats(), engines[0].stats()
        finally:
            for engine in engines:
                await engine.close()

    turns, context, moved, full_while_moving, counters, dest, source = asyncio.run(main())
    assert full_while_moving and moved.cell_id == "c1" and counters["parked_moves"] == 1
    assert dest["restores"] == 1 and moved.generation.cached_tokens > 0  # its KV came along, parked on c1
    assert source["parked_sessions"] == 0  # nothing left behind on the full cell

    async def unparked():  # the same three calls in one session on one engine, nothing parked or moved
        engine = HFEngine(tiny_model_path)
        try:
            calls = [prompt(30, seed=5)]
            for turn, response in enumerate(turns):
                assert (await engine.generate("e/main", calls[-1], GREEDY)).response_ids == response
                calls.append(calls[-1] + response + prompt(4, seed=20 + turn))
            return await engine.generate("e/main", calls[-1], GREEDY)
        finally:
            await engine.close()

    reference = asyncio.run(unparked())
    assert (moved.generation.response_ids, moved.generation.logprobs) == (reference.response_ids, reference.logprobs)
