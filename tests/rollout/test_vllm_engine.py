"""VLLMEngine on the tiny model (GPU only: skipped without CUDA; needs vLLM installed).

vLLM's output handler is bound to one event loop, so every test here runs on one module-scoped loop
and shares one engine; tests that change the engine (sleep, weights) come last.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import torch

from gyre.rollout.base import EngineAsleepError, KVState, PromptTooLongError, SamplingParams

pytestmark = pytest.mark.gpu

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=16)


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def model_path(tiny_model_path):
    return os.environ.get("GYRE_VLLM_TEST_MODEL", tiny_model_path)


@pytest.fixture(scope="module")
def engine(loop, model_path):
    pytest.importorskip("vllm")
    from gyre.rollout.vllm_engine import VLLMEngine

    async def make():
        return VLLMEngine(
            model_path,
            dtype="float32",
            max_context=2048,
            gpu_memory_utilization=0.2,
            enforce_eager=True,
            max_batch_size=32,
        )

    engine = loop.run_until_complete(make())
    yield engine
    loop.run_until_complete(engine.close())


@pytest.fixture(scope="module")
def hf_model(model_path):
    from gyre.models import load_model

    return load_model(model_path, dtype="float32", device="cuda").eval()


def prompt(length: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(16, 2000, (length,), generator=generator).tolist()


def teacher_forced(hf_model, ids: list[int], response: list[int], temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = hf_model(torch.tensor([ids + response], device="cuda")).logits[0].float()
    scaled = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
    rows = torch.arange(len(ids) - 1, len(ids) + len(response) - 1, device="cuda")
    return scaled[rows, torch.tensor(response, device="cuda")].cpu()


def test_greedy_matches_transformers(loop, engine, hf_model):
    ids = prompt(20, seed=0)
    out = loop.run_until_complete(engine.generate("g", ids, GREEDY))
    with torch.no_grad():
        ref = hf_model.generate(torch.tensor([ids], device="cuda"), max_new_tokens=16, do_sample=False)[0, 20:].tolist()
    assert out.response_ids[:8] == ref[:8]  # fp32 kernels differ; the first tokens must agree
    assert out.finish_reason in ("length", "stop") and len(out.logprobs) == len(out.response_ids)


@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.7])
def test_logprobs_match_teacher_forced(loop, engine, hf_model, temperature):
    ids = prompt(17, seed=1)
    sampling = SamplingParams(temperature=temperature, max_new_tokens=12, seed=5)
    out = loop.run_until_complete(engine.generate("lp", ids, sampling))
    expected = teacher_forced(hf_model, ids, out.response_ids, temperature)
    assert torch.allclose(torch.tensor(out.logprobs), expected, atol=2e-3)


def test_concurrent_calls_and_prefix_cache(loop, engine):
    async def main():
        prompts = [prompt(5 + 7 * i, seed=10 + i) for i in range(8)]
        outs = await asyncio.gather(*[engine.generate(f"c{i}", ids, GREEDY) for i, ids in enumerate(prompts)])
        alone = [await engine.generate(f"a{i}", ids, GREEDY) for i, ids in enumerate(prompts)]
        follow = prompts[0] + outs[0].response_ids + prompt(40, seed=99)
        await engine.generate("c0", follow, GREEDY)
        return outs, alone

    outs, alone = loop.run_until_complete(main())
    assert all(len(o.response_ids) >= 1 for o in outs)
    assert [o.response_ids[:4] for o in outs] == [a.response_ids[:4] for a in alone]
    assert engine.stats()["prefix_hit_tokens"] > 0  # prefix caching served repeated prompts


def test_abort_returns_partial_tokens(loop, engine):
    async def main():
        task = asyncio.ensure_future(
            engine.generate("ab", prompt(10, seed=2), SamplingParams(temperature=1.0, max_new_tokens=1500, seed=1))
        )
        while engine.stats()["running"] < 1 or engine.stats()["generated_tokens"] < 1:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
        assert await engine.abort("ab")
        return await task

    out = loop.run_until_complete(main())
    assert out.finish_reason == "abort" and len(out.response_ids) < 1500


def test_errors_and_export_import(loop, engine):
    async def main():
        with pytest.raises(PromptTooLongError, match="2048"):
            await engine.generate("e", prompt(2048, seed=3), GREEDY)
        await engine.generate("x", prompt(12, seed=4), GREEDY)
        state = await engine.export_session("x")
        assert state is not None and state.tensors == [] and len(state.tokens) > 12
        before = engine.stats()["kv_import_fallbacks"]
        await engine.import_session("y", KVState(state.tokens, 0, tensors=[]))
        assert engine.stats()["kv_import_fallbacks"] == before + 1

    loop.run_until_complete(main())


def test_sleep_wake_round_trip(loop, engine):
    async def main():
        ids = prompt(15, seed=6)
        before = await engine.generate("s1", ids, GREEDY)
        await engine.sleep(level=1)
        with pytest.raises(EngineAsleepError):
            await engine.generate("s2", ids, GREEDY)
        await engine.wake()
        after = await engine.generate("s3", ids, GREEDY)
        return before, after

    before, after = loop.run_until_complete(main())
    assert before.response_ids == after.response_ids


def test_load_weights_changes_output_and_version(loop, engine, hf_model):
    generator = torch.Generator().manual_seed(0)
    new = [
        (n, (p.detach().float().cpu() + 0.2 * torch.randn(p.shape, generator=generator)))
        for n, p in hf_model.named_parameters()
    ]

    async def main():
        ids = prompt(15, seed=7)
        before = await engine.generate("w", ids, GREEDY)
        checksum = await engine.weight_checksum("model.norm.weight")
        await engine.load_weights(new, version=1)
        after = await engine.generate("w2", ids, GREEDY)
        return before, after, checksum, await engine.weight_checksum("model.norm.weight")

    before, after, checksum_before, checksum_after = loop.run_until_complete(main())
    assert engine.weight_version == 1 and after.weight_version == 1
    assert checksum_after != checksum_before
    assert after.response_ids != before.response_ids
