"""HFEngine on the real tiny model (no mocks): exactness against transformers, batching, sessions,
export/import, weights, abort, errors, eviction, sleep. Each test drives the engine with asyncio.run."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from gyre.models import load_model
from gyre.rollout import make_engine
from gyre.rollout.base import (
    EngineAsleepError,
    InvalidTokenError,
    KVState,
    PromptTooLongError,
    SamplingError,
    SamplingParams,
)
from gyre.rollout.hf import HFEngine

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=16)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return load_model(tiny_model_path).eval()


@pytest.fixture
def engine(tiny_model_path):
    engine = HFEngine(tiny_model_path)
    yield engine
    asyncio.run(engine.close())


def prompt(length: int, seed: int) -> list[int]:
    """Random ordinary tokens (ids >= 16 skip the special tokens, EOS among them)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(16, 2000, (length,), generator=generator).tolist()


def reference_greedy(model, ids: list[int], max_new_tokens: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False)
    return out[0, len(ids) :].tolist()


def teacher_forced_logprobs(model, ids: list[int], response: list[int], temperature: float) -> torch.Tensor:
    """What the trainer recomputes: log_softmax(logits / T) at each response token."""
    with torch.no_grad():
        logits = model(torch.tensor([ids + response])).logits[0].float()
    scaled = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
    rows = torch.arange(len(ids) - 1, len(ids) + len(response) - 1)
    return scaled[rows, torch.tensor(response)]


def test_greedy_equals_transformers_generate(engine, model):
    async def main():
        for i, length in enumerate((3, 19, 41)):
            ids = prompt(length, seed=i)
            out = await engine.generate(f"s{i}", ids, SamplingParams(temperature=0.0, max_new_tokens=24))
            assert out.response_ids == reference_greedy(model, ids, 24)
            assert out.finish_reason in ("length", "stop")
            assert out.weight_version == 0 and len(out.logprobs) == len(out.response_ids)

    asyncio.run(main())


@pytest.mark.parametrize(("temperature", "top_p"), [(0.0, 1.0), (1.0, 1.0), (0.7, 1.0), (0.7, 0.9)])
def test_logprobs_equal_teacher_forced_forward(engine, model, temperature, top_p):
    async def main():
        ids = prompt(23, seed=7)
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=20, seed=3)
        out = await engine.generate("lp", ids, sampling)
        expected = teacher_forced_logprobs(model, ids, out.response_ids, temperature)
        assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-4, rtol=0)

    asyncio.run(main())


@pytest.mark.gpu
def test_on_cuda_greedy_and_logprobs_match_transformers_on_the_same_device(tiny_model_path):
    """The engine on a GPU: batched greedy calls give transformers' tokens, and each call's log-probs are what
    the trainer recomputes on the same device (the behaviour log-probs the loss ratios against)."""
    cuda_model = load_model(tiny_model_path, device="cuda").eval()
    engine = HFEngine(tiny_model_path, device="cuda")

    async def main():
        prompts = [prompt(length, seed=i) for i, length in enumerate((3, 19, 41, 77))]
        outs = await asyncio.gather(*(engine.generate(f"s{i}", ids, GREEDY) for i, ids in enumerate(prompts)))
        for ids, out in zip(prompts, outs, strict=True):
            with torch.no_grad():
                generated = cuda_model.generate(torch.tensor([ids], device="cuda"), max_new_tokens=16, do_sample=False)
            assert out.response_ids == generated[0, len(ids):].tolist()
            with torch.no_grad():
                logits = cuda_model(torch.tensor([ids + out.response_ids], device="cuda")).logits[0].float()
            rows = torch.arange(len(ids) - 1, len(ids) + len(out.response_ids) - 1, device="cuda")
            expected = torch.log_softmax(logits, dim=-1)[rows, torch.tensor(out.response_ids, device="cuda")]
            assert torch.allclose(torch.tensor(out.logprobs), expected.cpu(), atol=1e-4, rtol=0)

    try:
        asyncio.run(main())
    finally:
        asyncio.run(engine.close())


def test_seeded_sampling_is_reproducible_even_when_batched(engine):
    async def main():
        ids = prompt(11, seed=1)
        sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=1234)
        alone = await engine.generate("a", ids, sampling)
        others = [engine.generate(f"o{i}", prompt(5 + i, seed=50 + i), sampling) for i in range(4)]
        batched, *_ = await asyncio.gather(engine.generate("b", ids, sampling), *others)
        assert batched.response_ids == alone.response_ids
        unseeded = SamplingParams(temperature=1.0, max_new_tokens=12)
        draws = {tuple((await engine.generate(f"u{i}", ids, unseeded)).response_ids) for i in range(3)}
        assert len(draws) > 1  # no seed: independent draws

    asyncio.run(main())


def test_concurrent_sessions_match_one_by_one(tiny_model_path):
    prompts = [prompt(2 + 3 * i, seed=100 + i) for i in range(16)]

    async def one_by_one(engine):
        return [await engine.generate(f"s{i}", ids, GREEDY) for i, ids in enumerate(prompts)]

    async def concurrently(engine):
        peak = 0

        async def watch():
            nonlocal peak
            while True:
                peak = max(peak, int(engine.stats()["running"]))
                await asyncio.sleep(0.001)

        watcher = asyncio.create_task(watch())
        outs = await asyncio.gather(*[engine.generate(f"s{i}", ids, GREEDY) for i, ids in enumerate(prompts)])
        watcher.cancel()
        return outs, peak

    solo_engine, batch_engine = HFEngine(tiny_model_path), HFEngine(tiny_model_path)
    try:
        alone = asyncio.run(one_by_one(solo_engine))
        together, peak = asyncio.run(concurrently(batch_engine))
    finally:
        asyncio.run(solo_engine.close())
        asyncio.run(batch_engine.close())
    assert peak > 1, "calls never ran in one decode batch"
    for a, b in zip(alone, together, strict=True):
        assert a.response_ids == b.response_ids
        assert a.finish_reason == b.finish_reason
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_second_turn_reuses_cache_and_matches_cold_run(tiny_model_path, model):
    first = prompt(30, seed=3)

    async def main():
        warm = HFEngine(tiny_model_path)
        try:
            turn1 = await warm.generate("chat", first, GREEDY)
            second = first + turn1.response_ids + prompt(7, seed=4)
            turn2 = await warm.generate("chat", second, GREEDY)
            stats = warm.stats()
        finally:
            await warm.close()
        return second, turn1, turn2, stats

    second, turn1, turn2, stats = asyncio.run(main())
    reused = len(first) + len(turn1.response_ids) - 1  # the last sampled token was never fed
    assert turn2.cached_tokens == reused
    assert stats["prefix_hit_tokens"] == reused
    assert stats["prefix_hit_rate"] == pytest.approx(reused / (len(first) + len(second)))
    assert turn2.timings["prefill_tokens"] == len(second) - reused
    cold = HFEngine(tiny_model_path)
    try:
        cold_turn2 = asyncio.run(cold.generate("fresh", second, GREEDY))
    finally:
        asyncio.run(cold.close())
    assert turn2.response_ids == cold_turn2.response_ids == reference_greedy(model, second, 16)


def test_export_import_continues_like_staying_put(tiny_model_path):
    async def main():
        a, b = HFEngine(tiny_model_path, engine_id="a"), HFEngine(tiny_model_path, engine_id="b")
        try:
            first = prompt(25, seed=5)
            turn1 = await a.generate("s", first, GREEDY)
            state = await a.export_session("s")
            assert state is not None and state.tokens == first + turn1.response_ids[:-1]
            assert state.tensors[0][0].shape == (2, len(state.tokens), 16) and state.tensors[0][0].device.type == "cpu"
            await b.import_session("s", state)
            second = first + turn1.response_ids + prompt(6, seed=6)
            stayed, moved = await a.generate("s", second, GREEDY), await b.generate("s", second, GREEDY)
            return state, stayed, moved, b.stats()
        finally:
            await a.close()
            await b.close()

    state, stayed, moved, stats_b = asyncio.run(main())
    assert moved.response_ids == stayed.response_ids
    assert moved.cached_tokens == len(state.tokens)
    assert stats_b["kv_import_fallbacks"] == 0
    assert stats_b["prefix_hit_tokens"] == len(state.tokens)


def test_mismatching_import_falls_back_and_counts(tiny_model_path, model):
    async def main():
        a, b = HFEngine(tiny_model_path), HFEngine(tiny_model_path)
        try:
            first = prompt(20, seed=8)
            turn1 = await a.generate("s", first, GREEDY)
            state = await a.export_session("s")
            other_prompt = prompt(30, seed=9)  # does not start with the cached tokens
            await b.import_session("x", state)
            wrong_tokens = await b.generate("x", other_prompt, GREEDY)
            stale = KVState(state.tokens, weight_version=5, tensors=state.tensors)
            await b.import_session("y", stale)
            follow_up = first + turn1.response_ids
            wrong_version = await b.generate("y", follow_up, GREEDY)
            await b.import_session("z", KVState(state.tokens, 0, tensors=[]))  # e.g. from vLLM: no tensors
            return other_prompt, wrong_tokens, follow_up, wrong_version, b.stats()
        finally:
            await a.close()
            await b.close()

    other_prompt, wrong_tokens, follow_up, wrong_version, stats = asyncio.run(main())
    assert stats["kv_import_fallbacks"] == 3
    assert stats["prefix_hit_tokens"] == 0
    assert wrong_tokens.cached_tokens == 0 and wrong_version.cached_tokens == 0
    assert wrong_tokens.response_ids == reference_greedy(model, other_prompt, 16)
    assert wrong_version.response_ids == reference_greedy(model, follow_up, 16)


def test_import_with_wrong_shapes_is_a_clear_error(engine):
    async def main():
        bad = KVState([20, 21, 22], 0, tensors=[(torch.zeros(2, 3, 16), torch.zeros(2, 3, 16))])
        with pytest.raises(ValueError, match="layers"):
            await engine.import_session("s", bad)
        bad = KVState([20, 21], 0, tensors=[(torch.zeros(2, 3, 16), torch.zeros(2, 3, 16))] * 2)
        with pytest.raises(ValueError, match=r"state.tensors\[0\] key has shape"):
            await engine.import_session("s", bad)

    asyncio.run(main())


def test_load_weights_changes_output_version_and_recomputes_stale_cache(tiny_model_path):
    base = load_model(tiny_model_path).eval()
    generator = torch.Generator().manual_seed(0)
    new_weights = {
        name: p.detach() + 0.2 * torch.randn(p.shape, generator=generator) for name, p in base.named_parameters()
    }
    updated = load_model(tiny_model_path).eval()
    updated.load_state_dict(new_weights, strict=False)
    first = prompt(20, seed=10)

    async def main(engine):
        before = await engine.generate("s", first, GREEDY)
        await engine.load_weights(new_weights.items(), version=1)
        after = await engine.generate("fresh", first, GREEDY)
        second = first + before.response_ids + prompt(4, seed=11)
        stale_turn = await engine.generate("s", second, GREEDY)
        return before, after, second, stale_turn, engine.stats()

    engine = HFEngine(tiny_model_path)
    try:
        before, after, second, stale_turn, stats = asyncio.run(main(engine))
        assert engine.weight_version == 1
    finally:
        asyncio.run(engine.close())
    assert after.response_ids != before.response_ids
    assert after.weight_version == 1 and before.weight_version == 0
    assert after.response_ids == reference_greedy(updated, first, 16)
    assert stale_turn.cached_tokens == 0 and stats["stale_recomputes"] == 1
    assert stale_turn.response_ids == reference_greedy(updated, second, 16)


def test_load_weights_rejects_unknown_names_and_shapes_without_changing_anything(engine):
    async def main():
        with pytest.raises(KeyError, match="not a parameter"):
            await engine.load_weights([("model.norm.weight", torch.ones(64)), ("nope", torch.ones(1))], version=3)
        with pytest.raises(ValueError, match="shape"):
            await engine.load_weights([("model.norm.weight", torch.ones(65))], version=3)
        assert engine.weight_version == 0

    asyncio.run(main())


def test_abort_returns_partial_tokens(engine, model):
    ids = prompt(12, seed=12)
    long_run = SamplingParams(temperature=0.0, max_new_tokens=300)
    full = reference_greedy(model, ids, 300)
    assert len(full) == 300, "pick a prompt whose greedy run does not hit EOS"

    async def main():
        task = asyncio.create_task(engine.generate("s", ids, long_run))
        while engine.stats()["generated_tokens"] < 5:
            await asyncio.sleep(0.001)
        assert await engine.abort("s") is True
        out = await task
        assert await engine.abort("s") is False
        return out

    out = asyncio.run(main())
    assert out.finish_reason == "abort"
    assert 5 <= len(out.response_ids) < 300
    assert out.response_ids == full[: len(out.response_ids)]
    assert len(out.logprobs) == len(out.response_ids)


def test_cancelled_caller_frees_its_slot(engine):
    async def main():
        task = asyncio.create_task(
            engine.generate("s", prompt(8, seed=13), SamplingParams(temperature=0.0, max_new_tokens=300))
        )
        while engine.stats()["generated_tokens"] < 2:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(2000):
            if engine.stats()["running"] == 0:
                break
            await asyncio.sleep(0.001)
        assert engine.stats()["running"] == 0

    asyncio.run(main())


def test_errors_name_the_problem(tiny_model_path):
    engine = HFEngine(tiny_model_path, max_context=64)

    async def main():
        with pytest.raises(PromptTooLongError, match=r"64 tokens.*context is 64"):
            await engine.generate("s", prompt(64, seed=0), GREEDY)
        out = await engine.generate("s", prompt(63, seed=0), GREEDY)  # exactly fits one new token
        assert out.finish_reason == "length" and len(out.response_ids) == 1
        with pytest.raises(InvalidTokenError, match=r"prompt_ids\[1\] = 5000"):
            await engine.generate("s", [20, 5000], GREEDY)
        with pytest.raises(SamplingError, match=r"stop_token_ids\[0\] = -1"):
            await engine.generate("s", [20], SamplingParams(stop_token_ids=(-1,)))
        with pytest.raises(InvalidTokenError, match="empty"):
            await engine.generate("s", [], GREEDY)
        with pytest.raises(TypeError, match="SamplingParams"):
            await engine.generate("s", [20], {"temperature": 0})

    try:
        asyncio.run(main())
    finally:
        asyncio.run(engine.close())
    with pytest.raises(SamplingError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(SamplingError, match="temperature"):
        SamplingParams(temperature=-1.0)
    with pytest.raises(ValueError, match="max_context"):
        HFEngine(tiny_model_path, max_context=10**9)


def test_stop_token_ends_call_with_stop(engine, model):
    ids = prompt(15, seed=14)
    expected = reference_greedy(model, ids, 16)
    stop_at = expected[5]

    async def main():
        return await engine.generate(
            "s", ids, SamplingParams(temperature=0.0, max_new_tokens=16, stop_token_ids=(stop_at,))
        )

    out = asyncio.run(main())
    assert out.finish_reason == "stop"
    assert out.response_ids == expected[: expected.index(stop_at) + 1]


def test_lru_eviction_keeps_cached_tokens_under_the_bound(tiny_model_path):
    engine = HFEngine(tiny_model_path, max_cached_tokens=100)

    async def main():
        seen = []
        for i in range(5):
            await engine.generate(f"s{i}", prompt(30, seed=20 + i), GREEDY)
            seen.append(engine.stats())
        hit = await engine.generate("s4", prompt(30, seed=24) + [30, 31], GREEDY)  # most recent survives
        return seen, hit

    try:
        seen, hit = asyncio.run(main())
    finally:
        asyncio.run(engine.close())
    assert all(stats["cached_tokens"] <= 100 for stats in seen)
    assert seen[-1]["cached_sessions"] < 5 and seen[-1]["evictions"] >= 3
    assert hit.cached_tokens == 30


def test_sleep_wake_round_trip(engine):
    ids = prompt(17, seed=30)

    async def main():
        before = await engine.generate("s", ids, GREEDY)
        await engine.sleep()
        stats = engine.stats()
        assert stats["asleep"] == 1 and stats["cached_sessions"] == 0
        with pytest.raises(EngineAsleepError, match="asleep"):
            await engine.generate("t", ids, GREEDY)
        await engine.wake()
        after = await engine.generate("t", ids, GREEDY)
        await engine.sleep(level=2)
        await engine.wake()
        reloaded = await engine.generate("u", ids, GREEDY)
        return before, after, reloaded

    before, after, reloaded = asyncio.run(main())
    assert before.response_ids == after.response_ids == reloaded.response_ids


def test_sleep_aborts_in_flight_calls(engine):
    async def main():
        task = asyncio.create_task(
            engine.generate("s", prompt(9, seed=31), SamplingParams(temperature=0.0, max_new_tokens=300))
        )
        while engine.stats()["generated_tokens"] < 1:
            await asyncio.sleep(0.001)
        await engine.sleep()
        return await task

    out = asyncio.run(main())
    assert out.finish_reason == "abort" and 1 <= len(out.response_ids) < 300


def test_event_loop_stays_responsive_while_generating(engine):
    async def main():
        gaps = []

        async def tick():
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        sampling = SamplingParams(temperature=0.0, max_new_tokens=64)
        started = time.perf_counter()
        await asyncio.gather(*[engine.generate(f"s{i}", prompt(200, seed=40 + i), sampling) for i in range(8)])
        generation_s = time.perf_counter() - started
        ticker.cancel()
        return max(gaps), generation_s

    longest_gap, generation_s = asyncio.run(main())
    # An engine generating on the loop stalls it for about the whole generation; a loaded machine may hold a
    # healthy loop back for a scheduler slice or two (0.36 s once in CI beside a training run), never a quarter of it.
    assert longest_gap < max(0.25, generation_s / 4), (longest_gap, generation_s)


def test_closed_engine_refuses_calls(tiny_model_path):
    engine = HFEngine(tiny_model_path)
    asyncio.run(engine.generate("s", [20, 21], GREEDY))
    asyncio.run(engine.close())
    asyncio.run(engine.close())  # idempotent
    with pytest.raises(EngineAsleepError, match="closed"):
        asyncio.run(engine.generate("s", [20, 21], GREEDY))


def test_make_engine(tiny_model_path):
    engine = make_engine("hf", model_path=tiny_model_path, engine_id="hf-7")
    assert isinstance(engine, HFEngine) and engine.engine_id == "hf-7"
    with pytest.raises(ValueError, match="hf, vllm"):
        make_engine("sglang")


def test_rollout_configs_match_the_engine_constructors(tiny_model_path):
    import inspect
    from pathlib import Path

    from omegaconf import OmegaConf

    from gyre.rollout import make_engine_from_config
    from gyre.rollout.vllm_engine import VLLMEngine

    conf = Path(__file__).resolve().parents[2] / "conf" / "rollout"
    hf = OmegaConf.load(conf / "hf.yaml")
    engine = make_engine_from_config(hf, model_path=tiny_model_path, engine_id="cell-3")
    assert isinstance(engine, HFEngine) and engine.engine_id == "cell-3"
    vllm_keys = set(OmegaConf.load(conf / "vllm.yaml")) - {"kind"}
    assert vllm_keys <= set(inspect.signature(VLLMEngine).parameters)  # vLLM itself is not needed for this


def test_running_calls_stay_within_the_cache_budget_and_stay_exact(tiny_model_path, model):
    """Three calls that together outgrow max_cached_tokens: the newest are preempted (cache dropped, context
    recomputed later), the KV held never exceeds the budget at any step, and every result is still exactly
    what the call would produce alone."""
    engine = HFEngine(tiny_model_path, max_cached_tokens=150)
    held: list[int] = []
    forward = engine._runner.forward

    def observed_forward(rows, tokens):
        logits = forward(rows, tokens)
        held.append(engine._store.total_tokens + sum(call.kv_len for call in engine._running))
        return logits

    engine._runner.forward = observed_forward
    prompts = [prompt(40, seed=60 + i) for i in range(3)]

    async def main():
        sampling = SamplingParams(temperature=0.0, max_new_tokens=30)
        return await asyncio.gather(*(engine.generate(f"p{i}", ids, sampling) for i, ids in enumerate(prompts)))

    try:
        outs = asyncio.run(main())
        stats = engine.stats()
    finally:
        asyncio.run(engine.close())
    assert max(held) <= 150 and len(held) > 30
    assert stats["preemptions"] >= 1 and stats["recomputed_tokens"] >= 40
    for ids, out in zip(prompts, outs):
        assert out.response_ids == reference_greedy(model, ids, 30)


def test_an_evicted_session_counts_the_tokens_it_recomputes(tiny_model_path):
    engine = HFEngine(tiny_model_path, max_cached_tokens=100)

    async def main():
        first = await engine.generate("a", prompt(60, seed=70), GREEDY)
        await engine.generate("b", prompt(60, seed=71), GREEDY)  # a's cache must go to make room
        assert engine.stats()["evictions"] >= 1 and engine.stats()["recomputed_tokens"] == 0
        again = prompt(60, seed=70) + first.response_ids + [20]
        out = await engine.generate("a", again, GREEDY)
        return first, out

    try:
        first, out = asyncio.run(main())
        stats = engine.stats()
    finally:
        asyncio.run(engine.close())
    assert out.cached_tokens == 0
    assert stats["recomputed_tokens"] == 60 + len(first.response_ids) - 1  # what a's evicted cache held


def test_the_context_is_bounded_by_the_cache_budget(tiny_model_path):
    engine = HFEngine(tiny_model_path, max_cached_tokens=50)
    try:
        assert engine.max_context == 50
        with pytest.raises(PromptTooLongError, match=r"50 tokens.*context is 50"):
            asyncio.run(engine.generate("s", prompt(50, seed=0), GREEDY))
    finally:
        asyncio.run(engine.close())
    with pytest.raises(ValueError, match="max_cached_tokens must be >= 2"):
        HFEngine(tiny_model_path, max_cached_tokens=1)
    with pytest.raises(ValueError, match="max_context=64 is more than max_cached_tokens=50"):
        HFEngine(tiny_model_path, max_cached_tokens=50, max_context=64)
