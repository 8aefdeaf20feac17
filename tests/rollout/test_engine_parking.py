"""KV parking in HFEngine on the real tiny model: a parked session's next call gives exactly what it would
have without parking (restored from host or recomputed after a drop), a parked session's budget admits
another session's call, and park answers False for a session it cannot park."""

from __future__ import annotations

import asyncio

import pytest
import torch

from gyre.rollout.base import SamplingParams
from gyre.rollout.hf import HFEngine

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)
SEEDED = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=12, seed=7)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def prompt(length: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(16, 2000, (length,), generator=generator).tolist()


def run_sessions(engine: HFEngine, sampling: SamplingParams, park: bool, turns: int = 3) -> list[tuple[list[int], list[float], int]]:
    """Three sessions taking turns, each turn extending its own context (response + a tool output); with
    ``park`` every session is parked as soon as its call returns. (response, logprobs, cached tokens) per call."""

    async def main():
        contexts = {f"s{i}": prompt(30 + 7 * i, seed=i) for i in range(3)}
        outs = []
        for turn in range(turns):
            for session_id, context in contexts.items():
                out = await engine.generate(session_id, context, sampling)
                outs.append((out.response_ids, out.logprobs, out.cached_tokens))
                context += out.response_ids + prompt(5, seed=100 + turn)
                if park:
                    assert await engine.park(session_id)
        return outs

    return asyncio.run(main())


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
@pytest.mark.parametrize("host_bytes", [1 << 30, 0], ids=["host", "drop"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_parking_after_every_call_changes_no_token_or_logprob(tiny_model_path, sampling, host_bytes, device):
    """On CUDA, "host" is the real move: the KV leaves GPU memory for host memory and comes back."""
    never = HFEngine(tiny_model_path, device=device)
    parking = HFEngine(tiny_model_path, max_parked_bytes=host_bytes, device=device)
    try:
        expected = run_sessions(never, sampling, park=False)
        got = run_sessions(parking, sampling, park=True)
        stats = parking.stats()
    finally:
        asyncio.run(never.close())
        asyncio.run(parking.close())
    assert [tokens for tokens, _, _ in got] == [tokens for tokens, _, _ in expected]
    for (_, logprobs, _), (_, reference, _) in zip(got, expected, strict=True):
        assert logprobs == pytest.approx(reference, abs=1e-6)
    later = got[3:]  # every session's second and third calls
    assert stats["parks"] == 9 and stats["cached_sessions"] == 0
    if host_bytes:  # restored from host: the whole prefix is reused, nothing recomputed
        assert [cached for _, _, cached in later] == [cached for _, _, cached in expected[3:]]
        assert all(cached > 0 for _, _, cached in later)
        assert stats["restores"] == 6 and stats["parked_sessions"] == 3 and stats["parked_caches_dropped"] == 0
        assert stats["restore_bytes_from_host"] > 0 and stats["park_bytes_to_host"] >= stats["restore_bytes_from_host"]
        assert stats["park_recomputed_tokens"] == 0
    else:  # dropped: every later call recomputes its context
        assert all(cached == 0 for _, _, cached in later)
        assert stats["restores"] == 0 and stats["parked_sessions"] == 0 and stats["parked_caches_dropped"] == 9
        assert stats["park_recomputed_tokens"] == sum(cached for _, _, cached in expected[3:])
        assert stats["restore_recompute_s"] > 0 and stats["park_bytes_to_host"] == 0


def test_a_parked_session_frees_its_budget_for_another(tiny_model_path):
    """A budget of 100 tokens holds one 60-token session. Without parking, b's call evicts a's cache and a
    recomputes it; parked (each session as its call returns), a's cache waits on host, b runs without
    evicting anything, and a's next call takes its cache back."""

    async def two_sessions(engine: HFEngine, park: bool):
        first = await engine.generate("a", prompt(60, seed=70), GREEDY)
        if park:
            assert await engine.park("a")
            held = engine.stats()
            assert held["cached_tokens"] == 0 and held["parked_tokens"] == 60 + len(first.response_ids) - 1
        await engine.generate("b", prompt(60, seed=71), GREEDY)
        if park:
            assert await engine.park("b")
        again = await engine.generate("a", prompt(60, seed=70) + first.response_ids + [20], GREEDY)
        return again, engine.stats()

    results = {}
    for park in (False, True):
        engine = HFEngine(tiny_model_path, max_cached_tokens=100)
        try:
            results[park] = asyncio.run(two_sessions(engine, park))
        finally:
            asyncio.run(engine.close())
    (plain, plain_stats), (parked, parked_stats) = results[False], results[True]
    assert parked.response_ids == plain.response_ids
    assert plain_stats["evictions"] >= 1 and plain.cached_tokens == 0 and plain_stats["recomputed_tokens"] > 0
    assert parked_stats["evictions"] == 0 and parked.cached_tokens > 0 and parked_stats["recomputed_tokens"] == 0
    assert parked_stats["parks"] == 2 and parked_stats["restores"] == 1 and parked_stats["parked_sessions"] == 1


def test_a_full_host_store_drops_the_least_recently_parked(tiny_model_path):
    engine = HFEngine(tiny_model_path)

    async def main():
        for i, name in enumerate("abc"):
            await engine.generate(name, prompt(40, seed=i), GREEDY)
        assert await engine.park("a") and await engine.park("b")
        engine._parked.max_bytes = int(engine.stats()["parked_bytes"] * 1.25)  # room for two of the equal caches
        assert await engine.park("c")
        assert "a" not in engine._parked and "b" in engine._parked and "c" in engine._parked
        return engine.stats()

    try:
        stats = asyncio.run(main())
    finally:
        asyncio.run(engine.close())
    assert stats["parked_sessions"] == 2 and stats["parked_caches_dropped"] == 1 and stats["parks"] == 3


def test_park_answers_false_for_unknown_busy_and_parked_sessions(tiny_model_path):
    engine = HFEngine(tiny_model_path)

    async def main():
        assert not await engine.park("nobody")
        running = asyncio.ensure_future(engine.generate("s", prompt(20, seed=3), SamplingParams(temperature=0.0, max_new_tokens=200)))
        while engine.stats()["generated_tokens"] < 2:
            await asyncio.sleep(0.005)
        assert not await engine.park("s")  # a call in flight keeps its cache: park after the call
        out = await running
        assert out.finish_reason in ("length", "stop")
        assert await engine.park("s")
        assert not await engine.park("s")  # already parked: nothing more to free
        exported = await engine.export_session("s")  # a parked session still exports (drain moves it)
        assert exported is not None and len(exported.tokens) == 20 + len(out.response_ids) - 1
        return engine.stats()

    try:
        stats = asyncio.run(main())
    finally:
        asyncio.run(engine.close())
    assert stats["parks"] == 1 and stats["parked_sessions"] == 1
