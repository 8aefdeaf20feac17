"""Routing: placement logic (unit), backpressure and drain against the live proxy with real engines."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest

from gyre.proxy.router import OverloadedError, RoutedCell, Router, _Attempt


class PlacementOnly:
    """Stands in for an engine in the pure placement tests: the router never calls it there."""

    max_context = 1024


def router_with(*capacities: int, max_sessions: int | None = None, timeout: float = 0.05) -> Router:
    cells = [RoutedCell(f"c{i}", PlacementOnly(), capacity=c, max_sessions=max_sessions) for i, c in enumerate(capacities)]  # type: ignore[arg-type]
    return Router(cells, queue_timeout_s=timeout, retry_after_s=2.0)


def occupy(cell: RoutedCell, execution_id: str, n: int = 1) -> None:
    for _ in range(n):
        cell.attempts.add(_Attempt(execution_id, f"{execution_id}/0", [1]))


def test_least_loaded_placement_and_affinity() -> None:
    async def run() -> None:
        router = router_with(4, 4)
        c0, c1 = router.cells["c0"], router.cells["c1"]
        occupy(c0, "busy", 2)
        assert (await router._acquire("a")) is c1  # fewest calls in flight
        occupy(c1, "a", 3)
        assert (await router._acquire("b")) is c0
        assert (await router._acquire("a")) is c1  # affinity beats load
        assert router.cell_of("a") == "c1" and router.cell_of("b") == "c0"
        router.release("a")
        assert router.cell_of("a") is None and "a" not in c1.executions

    asyncio.run(run())


def test_capacity_and_session_limits_backpressure() -> None:
    async def run() -> None:
        router = router_with(1, max_sessions=1, timeout=0.05)
        cell = router.cells["c0"]
        assert (await router._acquire("a")) is cell
        occupy(cell, "a")
        with pytest.raises(OverloadedError, match="at capacity") as info:
            await router._acquire("a")  # its cell is full: waits, then gives up
        assert info.value.retry_after_s == 2.0
        cell.attempts.clear()
        with pytest.raises(OverloadedError, match="no rollout cell"):
            await router._acquire("b")  # max one execution per cell
        # Room that frees up while a call waits is taken at once.
        occupy(cell, "a")
        waiter = asyncio.ensure_future(router._acquire("a"))
        await asyncio.sleep(0.01)
        cell.attempts.clear()
        router._notify()
        assert (await asyncio.wait_for(waiter, 1)) is cell
        assert router.counters["overloaded"] == 2

    asyncio.run(run())


def test_draining_cells_take_no_new_executions() -> None:
    async def run() -> None:
        router = router_with(4, 4)
        router.cells["c0"].draining = True
        assert (await router._acquire("a")).cell_id == "c1"
        router.undrain("c0")
        assert (await router._acquire("b")).cell_id == "c0"
        with pytest.raises(ValueError, match="into itself"):
            await router.drain("c0", "c0")
        with pytest.raises(KeyError, match="no cell 'nope'"):
            await router.drain("nope")

    asyncio.run(run())


def test_backpressure_returns_429_and_529_with_retry_after(server, proxy, execution, tuned, engines) -> None:
    """One slot per cell and a short queue: a second concurrent call of the execution is refused."""
    router = proxy.router
    tuned(router, queue_timeout_s=0.3)
    for cell in router.cells.values():
        tuned(cell, capacity=1)
    long = {"model": "m", "messages": [{"role": "user", "content": "go"}], "max_tokens": 3000, "temperature": 0}  # greedy: never stops early
    headers = {"authorization": f"Bearer {execution[1]}"}

    async def run() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
            first = asyncio.ensure_future(client.post("/v1/chat/completions", json=long, headers=headers))
            while not any(c.inflight for c in router.cells.values()):
                await asyncio.sleep(0.01)
            second = await client.post("/v1/chat/completions", json=long, headers=headers)
            body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
            third = await client.post("/v1/messages", json=body, headers={"x-api-key": execution[1]})
            streamed = await client.post("/v1/messages", json={**body, "stream": True}, headers={"x-api-key": execution[1]})
            assert streamed.status_code == 529 and streamed.headers["retry-after"] == "1"  # refused before the stream
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await first
            return second, third, first

    second, third, _ = asyncio.run(run())
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert second.json()["error"]["code"] == "rate_limit_exceeded" and "capacity" in second.json()["error"]["message"]
    assert third.status_code == 529 and third.json()["error"]["type"] == "overloaded_error"
    deadline = time.time() + 10
    while any(e.stats()["running"] + e.stats()["waiting"] for e in engines) and time.time() < deadline:
        time.sleep(0.02)  # the cancelled client's call is aborted by the engine
    assert not any(e.stats()["running"] for e in engines)


def test_drain_moves_sessions_mid_generation(server, proxy, engines) -> None:
    """2 cells, 20 sessions mid-generation, drain one: every call completes exactly once, moved
    sessions import their KV and reuse it, and every call is recorded once with its reroute."""
    router = proxy.router
    keys = {f"drain-{i}": proxy.open_execution(f"drain-{i}") for i in range(20)}
    before = [dict(e.stats()) for e in engines]
    # Greedy: this prompt's greedy continuation never hits EOS, so every call is still running at the drain.
    body = {"model": "m", "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 300, "temperature": 0}
    report: Any = None
    placed_before: dict[str, str | None] = {}

    async def run() -> dict[str, httpx.Response]:
        nonlocal report
        limits = httpx.Limits(max_connections=32)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120, limits=limits) as client:
            tasks = {
                name: asyncio.ensure_future(client.post("/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}))
                for name, key in keys.items()
            }
            deadline = time.time() + 30
            while time.time() < deadline:  # all 20 in flight and decoding
                inflight = sum(c.inflight for c in router.cells.values())
                generated = sum(e.stats()["generated_tokens"] - b["generated_tokens"] for e, b in zip(engines, before))
                if inflight == 20 and generated >= 200:
                    break
                await asyncio.sleep(0.01)
            assert inflight == 20 and generated >= 200, (inflight, generated)
            placed_before.update({name: router.cell_of(name) for name in keys})
            source = max(router.cells.values(), key=lambda c: c.inflight).cell_id
            report = await asyncio.to_thread(server.call, router.drain(source), 60)
            return {name: await task for name, task in tasks.items()}

    try:
        responses = asyncio.run(run())
    finally:
        for cell_id in list(router.cells):
            router.undrain(cell_id)
        for key in keys.values():
            proxy.close_execution(key)

    source, target = report.cell_id, next(c for c in router.cells if c != report.cell_id)
    moved = [name for name, cell in placed_before.items() if cell == source]
    assert report.moved_executions == len(moved) >= 5
    assert all(r.status_code == 200 for r in responses.values()), [r.text for r in responses.values() if r.status_code != 200]
    after = [e.stats() for e in engines]
    source_engine = int(source.split("-")[1])
    delta = [{k: a[k] - b[k] for k in ("calls_finished", "calls_aborted", "kv_import_fallbacks")} for a, b in zip(after, before)]
    # Exactly once: 20 calls delivered; every engine call that ended was either delivered or an abort we retried.
    assert delta[source_engine]["calls_aborted"] == report.aborted_calls
    assert sum(d["calls_finished"] - d["calls_aborted"] for d in delta) == 20
    rerouted = 0
    for name, response in responses.items():
        records = proxy.records(name)
        assert len(records) == 1, name  # recorded once, never duplicated
        record = records[0]
        usage = response.json()["usage"]
        assert usage["completion_tokens"] == len(record.response_ids) and usage["prompt_tokens"] == len(record.prompt_ids)
        if "reroutes" in record.meta:
            rerouted += 1
            assert name in moved and record.cell_id == target
            (hop,) = record.meta["reroutes"]
            assert hop["from"] == source and hop["to"] == target and hop["reason"] == "drain"
            assert record.meta["cached_tokens"] > 0  # the retry reused the imported KV
        else:
            assert name not in moved or record.cell_id == source  # finished before the abort landed
    assert rerouted == report.aborted_calls >= 5
    assert report.kv_imports >= rerouted and delta[1 - source_engine]["kv_import_fallbacks"] == 0
