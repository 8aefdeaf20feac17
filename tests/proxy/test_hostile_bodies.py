"""One execution cannot make the proxy spend memory or time out of proportion to what it sends.

A body whose JSON would take many times its size to parse is refused before parsing; a prompt that could
never fit the context window is refused before it is tokenised; count_tokens requests have a budget per
execution; and a heavy request is worked on off the event loop, its body scanned in short steps, so
another execution's call is answered meanwhile. (Memory ratios and delays are measured in ``benchmarks/reliability.py --parts hostile``.)
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time

import httpx
from test_bad_input import (
    CHAT,
    MESSAGES,
    anthropic_error,
    good_chat,
    good_messages,
    openai_error,
    post,
)

from gyre.proxy import body_cost

COUNT = "/v1/messages/count_tokens"


def wide_arrays(size: int) -> bytes:
    """A chat body whose messages are ``size`` bytes of empty arrays: ~20x its size once parsed."""
    return b'{"model":"m","messages":[' + b",".join([b"[]"] * (size // 3)) + b"]}"


def test_a_body_costly_to_parse_is_refused_before_parsing(server, execution) -> None:
    error = openai_error(post(server, CHAT, execution[1], wide_arrays(900_000)), 413, "max_parse_memory_ratio")
    assert "arrays/objects" in error["message"]
    anthropic_error(post(server, MESSAGES, execution[1], wide_arrays(900_000)), 413, "request_too_large")
    # The same shape, small: parsed (and refused for what it says), not for what it costs.
    openai_error(post(server, CHAT, execution[1], wide_arrays(3000)), 400, "messages[0]")
    assert post(server, CHAT, execution[1], good_chat()).status_code == 200


def test_the_estimate_bounds_what_parsing_takes() -> None:
    """The estimate is above the real cost of hostile shapes and near it for an agent's usual bodies."""
    import tracemalloc

    schema = {"type": "object", "properties": {"command": {"type": "string", "description": "what to run"}}}
    bodies = {
        "wide arrays": wide_arrays(300_000),
        "small strings": b"[" + b",".join([b'"ab"'] * 60_000) + b"]",
        "objects": b"[" + b",".join([b'{"a":1}'] * 40_000) + b"]",
        "tools": json.dumps({"tools": [{"name": f"t{i}", "input_schema": schema} for i in range(500)]}).encode(),
        "prompt": json.dumps({"messages": [{"role": "user", "content": "def f(x): return [x, {x: x}]\n" * 20_000}]}).encode(),
    }
    for name, raw in bodies.items():
        cost = body_cost.estimate(raw)
        tracemalloc.start()
        json.loads(raw)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert cost.estimate_bytes >= peak + len(raw), (name, cost, peak)
    assert body_cost.estimate(bodies["prompt"]).ratio < 4  # long strings: refused at no size
    assert body_cost.estimate(bodies["wide arrays"]).ratio > 20


def random_json(rng: random.Random, depth: int = 0) -> object:
    """A JSON value whose strings are full of what confuses a scan: quotes, backslash runs, brackets."""
    def text() -> str:
        return "".join(rng.choice(['a', '\\', '"', '[', '{', ',', ':', '\\\\', '\\"', 'é', '😀']) for _ in range(rng.randint(0, 30)))

    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return text()
    if roll < 0.6:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    if roll < 0.85:
        return {text(): random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return rng.choice([1.5, -3, True, None])


def test_separators_are_counted_outside_strings_whatever_the_chunk_boundaries(monkeypatch) -> None:
    """The string-aware scan carries its state (inside a string, backslashes pending) across chunks: its
    counts equal those of the whole body with every string blanked out, at any chunk size."""
    string = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
    monkeypatch.setattr(body_cost, "PAUSE_S", 0.0)
    rng = random.Random(0)
    for _ in range(120):
        raw = json.dumps(random_json(rng), ensure_ascii=rng.random() < 0.5).encode()
        skeleton = string.sub(b'""', raw)
        expected = (skeleton.count(b"[") + skeleton.count(b"{"), skeleton.count(b",") + skeleton.count(b":"))
        for chunk in (2, 7, 64, body_cost.STRING_SCAN_BYTES):
            monkeypatch.setattr(body_cost, "STRING_SCAN_BYTES", chunk)
            assert body_cost.outside_strings(raw) == expected, (raw, chunk)


def test_wide_characters_are_seen_across_scan_boundaries(monkeypatch) -> None:
    """A character that makes text wider counts wherever it falls, a chunk boundary included."""
    monkeypatch.setattr(body_cost, "SCAN_BYTES", 16)
    monkeypatch.setattr(body_cost, "PAUSE_S", 0.0)
    for offset in range(12, 20):
        for tail, width in (("\\u00e9", 1), ("\\u4e2d", 2), ("\\ud83d\\ude00", 4), ("中", 2), ("😀", 4)):
            raw = ('"' + "a" * offset + tail + '"').encode()
            assert body_cost.char_width(raw) == width, (offset, tail)


def test_a_prompt_too_long_for_any_window_is_refused_without_tokenising(server, proxy, execution, tuned) -> None:
    tuned(proxy.config, context_window=4096)  # so that such a prompt fits in the test proxy's body limit
    window, per_token = proxy.context_window(), proxy.template.max_token_chars
    text = "x" * (window * per_token + 1)
    body = good_chat(messages=[{"role": "user", "content": text}])
    openai_error(post(server, CHAT, execution[1], body), 400, "prompt is too long", "characters per token")
    counted = post(server, COUNT, execution[1], good_messages(messages=[{"role": "user", "content": text}]))
    anthropic_error(counted, 400, "invalid_request_error", "prompt is too long")
    # Shorter, still too long: counted in chunks (bounded memory) before any whole tokenisation.
    body = good_chat(messages=[{"role": "user", "content": "x " * (window * 2)}])
    openai_error(post(server, CHAT, execution[1], body), 400, "prompt is too long", "counted")


def test_count_tokens_has_a_budget_per_execution(server, proxy, execution, tuned) -> None:
    tuned(proxy.config, max_count_tokens_calls=2)
    for _ in range(2):
        answer = post(server, COUNT, execution[1], good_messages())
        assert answer.status_code == 200 and answer.json()["input_tokens"] > 0
    refused = post(server, COUNT, execution[1], good_messages())
    anthropic_error(refused, 429, "rate_limit_error", "proxy.max_count_tokens_calls")
    other = proxy.open_execution(f"{execution[0]}-other")  # the budget is the execution's own
    try:
        assert post(server, COUNT, other, good_messages()).status_code == 200
    finally:
        proxy.close_execution(other)


def test_another_execution_is_served_while_one_sends_a_heavy_request(server, proxy, execution, tuned) -> None:
    """A count_tokens of ~1 MiB of text (about a second of tokenising, allowed by a wide context window)
    runs off the event loop: a small call of another execution, sent just after it, is answered first."""
    tuned(proxy.config, context_window=1 << 21)
    heavy = good_messages(messages=[{"role": "user", "content": "word " * 190_000}])
    other = proxy.open_execution(f"{execution[0]}-other")
    finished: list[str] = []

    async def send(client: httpx.AsyncClient, name: str, path: str, key: str, body: dict, delay: float) -> int:
        await asyncio.sleep(delay)
        response = await client.post(server.base_url + path, json=body, headers={"authorization": f"Bearer {key}"})
        finished.append(name)
        return response.status_code

    async def main() -> list[int]:
        async with httpx.AsyncClient(timeout=120) as client:
            return list(await asyncio.gather(
                send(client, "heavy", COUNT, execution[1], heavy, 0.0),
                send(client, "light", CHAT, other, good_chat(), 0.15),
            ))

    try:
        started = time.perf_counter()
        statuses = asyncio.run(main())
    finally:
        proxy.close_execution(other)
    assert statuses == [200, 200], statuses
    assert finished == ["light", "heavy"], (finished, time.perf_counter() - started)
