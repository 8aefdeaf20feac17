"""Bad input gets a clear 4xx in the API's own error shape, and the proxy keeps serving."""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import time
from typing import Any

import httpx
import pytest

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


def post(server, path: str, key: str, body: Any, **kwargs: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}", **kwargs.pop("headers", {})}
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(server.base_url + path, content=content, headers=headers, timeout=60, **kwargs)


def openai_error(response: httpx.Response, status: int, *needles: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    for needle in needles:
        assert needle in error["message"], error
    return error


def anthropic_error(response: httpx.Response, status: int, kind: str, *needles: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    for needle in needles:
        assert needle in body["error"]["message"], body
    return body["error"]


def good_chat(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **extra}


def good_messages(**extra: Any) -> dict[str, Any]:
    return {"model": "claude", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        (b"{not json", ["not valid JSON"]),
        (b"[1, 2]", ["must be a JSON object"]),
        (b"\xff\xfe", ["not valid"]),
        (b"[" * 100_000 + b"]" * 100_000, ["nested too deeply"]),
        ({"model": "m"}, ["messages: field required"]),
        ({"messages": [{"role": "user", "content": "x"}]}, ["model: field required"]),
        (good_chat(messages="hi"), ["messages: expected an array"]),
        (good_chat(messages=[]), ["at least one message"]),
        (good_chat(messages=[{"role": "wizard", "content": "x"}]), ["messages[0].role"]),
        (good_chat(messages=[{"role": "user", "content": 5}]), ["messages[0].content"]),
        (good_chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]), ["image_url"]),
        (good_chat(messages=[{"role": "tool", "content": "x"}]), ["tool_call_id: field required"]),
        (good_chat(max_tokens="ten"), ["max_tokens: expected an integer"]),
        (good_chat(max_tokens=0), ["max_tokens: must be >= 1"]),
        (good_chat(max_tokens=10**12), ["max_tokens", "proxy.max_output_tokens"]),
        (good_chat(temperature="hot"), ["temperature"]),
        (good_chat(temperature=7), ["temperature: must be in"]),
        (good_chat(top_p=0), ["top_p"]),
        (good_chat(n=3), ["n: only 1"]),
        (good_chat(seed=-(2**80)), ["seed must fit in 64 bits"]),
        (good_chat(presence_penalty=1.0), ["presence_penalty"]),
        (good_chat(stream="yes"), ["stream: expected a boolean"]),
        (good_chat(tools=[{"type": "function", "function": {"name": "bad name!", "parameters": {}}}]), ["tools[0].function.name"]),
        (good_chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]), ["type 'object'"]),
        (good_chat(tools=[{"type": "function", "function": {"name": "f", "parameters": "x"}}]), ["must be a JSON object"]),
        (good_chat(tools=[{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]), ["defined twice"]),
        (good_chat(tools=[{"type": "function", "function": {"name": "f"}}], tool_choice={"type": "function", "function": {"name": "g"}}), ["tool_choice"]),
        (good_chat(stop=[""]), ["stop"]),
    ],
)
def test_openai_chat_bad_requests(server, execution, body: Any, needles: list[str]) -> None:
    openai_error(post(server, CHAT, execution[1], body), 400, *needles)


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        (b"{", ["not valid JSON"]),
        ({"model": "c", "messages": [{"role": "user", "content": "x"}]}, ["max_tokens: field required"]),
        (good_messages(max_tokens=-1), ["max_tokens: must be >= 1"]),
        (good_messages(max_tokens=10**9), ["max_tokens", "proxy.max_output_tokens"]),
        (good_messages(messages=[{"role": "tool", "content": "x"}]), ["messages[0].role"]),
        (good_messages(messages=[{"role": "user", "content": [{"type": "image", "source": {}}]}]), ["'image' blocks"]),
        (good_messages(messages=[{"role": "user", "content": [{"type": "tool_result"}]}]), ["tool_use_id: field required"]),
        (good_messages(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "pre"}]), ["prefill"]),
        (good_messages(tools=[{"name": "t"}]), ["input_schema: field required"]),
        (good_messages(tools=[{"name": "t", "input_schema": {"type": "string"}}]), ["type 'object'"]),
        (good_messages(tool_choice={"type": "tool", "name": "nope"}), ["tool_choice.name"]),
        (good_messages(top_k=5), ["top_k"]),
        (good_messages(temperature=1.5), ["temperature"]),
        (good_messages(system=[{"type": "image"}]), ["system[0].type"]),
    ],
)
def test_anthropic_bad_requests(server, execution, body: Any, needles: list[str]) -> None:
    anthropic_error(post(server, MESSAGES + "?beta=true", execution[1], body), 400, "invalid_request_error", *needles)


def test_auth_errors_in_each_shape(server, execution) -> None:
    response = httpx.post(server.base_url + CHAT, json=good_chat(), timeout=30)
    assert openai_error(response, 401, "no API key")["code"] == "invalid_api_key"
    response = httpx.post(server.base_url + MESSAGES, json=good_messages(), headers={"x-api-key": "gyre-wrong-key-000"}, timeout=30)
    anthropic_error(response, 401, "authentication_error", "invalid API key")


def test_unknown_model_is_served_and_unknown_routes_404(server, execution) -> None:
    response = post(server, CHAT, execution[1], good_chat(model="gpt-9-ultra"))
    assert response.status_code == 200 and response.json()["model"] == "gpt-9-ultra"
    openai_error(post(server, "/v1/embeddings", execution[1], {}), 404, "/v1/embeddings")
    anthropic_error(post(server, "/v1/messages/batches", execution[1], {}), 404, "not_found_error")
    assert httpx.get(server.base_url + CHAT, timeout=30).status_code == 405


def test_oversized_body(server, execution) -> None:
    big = good_chat(messages=[{"role": "user", "content": "x" * (2 * 1024 * 1024)}])
    openai_error(post(server, CHAT, execution[1], big), 413, "limit")
    anthropic_error(post(server, MESSAGES, execution[1], good_messages(system="y" * (2 * 1024 * 1024))), 413, "request_too_large")

    def chunked():  # no content-length: the limit is enforced while reading
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(40):
            yield b"z" * 65536
        yield b'"}]}'

    response = httpx.post(server.base_url + CHAT, content=chunked(), headers={"authorization": f"Bearer {execution[1]}"}, timeout=60)
    openai_error(response, 413, "exceeds the limit")


def test_bad_agent_header(server, execution) -> None:
    response = post(server, CHAT, execution[1], good_chat(), headers={"x-gyre-agent": "boss"})
    assert openai_error(response, 400, "x-gyre-agent")["param"] == "x-gyre-agent"


def test_client_disconnect_mid_stream_aborts_cleanly(server, proxy, execution, engines) -> None:
    aborted_before = sum(e.stats()["calls_aborted"] for e in engines)
    body = good_messages(max_tokens=4000, stream=True)
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", server.base_url + MESSAGES, json=body, headers={"x-api-key": execution[1]}) as response,
    ):
        assert response.status_code == 200
        first = next(response.iter_lines())
        assert first == "event: message_start"
    # leaving the block closed the connection mid-generation
    deadline = time.time() + 20
    while sum(e.stats()["calls_aborted"] for e in engines) == aborted_before and time.time() < deadline:
        time.sleep(0.05)
    assert sum(e.stats()["calls_aborted"] for e in engines) > aborted_before
    assert proxy.records(execution[0]) == []  # nobody received that call
    assert post(server, CHAT, execution[1], good_chat()).status_code == 200


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2, 3, 10**15, 2**63, -(2**70)])
    if kind == 3:
        return rng.choice([0.5, -1e308, 1e308, 1.5, float("nan")])
    if kind in (4, 5):
        return rng.choice(["", "x", "user", "assistant", "tool", "function", "text", "auto", "none", "\u0000", "é" * 50])
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["role", "content", "type", "text", "name", "input", "tool_use_id", "tool_calls", "function", "id", "arguments"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def mutate(rng: random.Random, body: dict[str, Any]) -> Any:
    body = json.loads(json.dumps(body))
    for _ in range(rng.randrange(1, 4)):
        choice = rng.randrange(6)
        if choice == 0 and body:
            body.pop(rng.choice(list(body)))
        elif choice == 1:
            key = rng.choice(list(body) + ["tools", "tool_choice", "system", "stream", "stop", "input", "instructions", "prompt"])
            body[key] = random_value(rng)
        elif choice == 2 and isinstance(body.get("messages"), list) and body["messages"]:
            body["messages"][0] = random_value(rng)
        elif choice == 3 and isinstance(body.get("messages"), list):
            body["messages"].append({"role": rng.choice(["user", "assistant", "tool", "system"]), "content": random_value(rng)})
        elif choice == 4:
            return rng.choice([b"", b"null", b"{", b"[]", b'{"model": ', b"\x00\x01", json.dumps(body).encode()[: rng.randrange(50)]])
        else:
            body["stream"] = rng.choice([True, False])
    return body


@pytest.mark.slow
def test_fuzz_keeps_the_proxy_up(server, proxy, execution, tuned) -> None:
    """~2000 random requests (mutated valid ones, garbage bodies, wrong paths/keys): never a 5xx, never down."""
    tuned(proxy.config, max_tokens_cap=2)
    rng = random.Random(1234)
    bases = {
        CHAT: good_chat(),
        MESSAGES: good_messages(),
        "/v1/responses": {"model": "m", "input": "hi", "max_output_tokens": 2},
        "/v1/completions": {"model": "m", "prompt": "hi", "max_tokens": 2},
        "/v1/messages/count_tokens": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    }
    requests: list[tuple[str, Any, dict[str, str]]] = []
    for _ in range(2000):
        path = rng.choice(list(bases) + ["/v1/nothing"])
        body = mutate(rng, bases.get(path, {}))
        key = execution[1] if rng.random() > 0.05 else "gyre-random"
        headers = {"authorization": f"Bearer {key}"} if rng.random() > 0.5 else {"x-api-key": key}
        requests.append((path, body, headers))

    statuses: dict[int, int] = {}
    failures: list[str] = []

    async def fire() -> None:
        limits = httpx.Limits(max_connections=16)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60, limits=limits) as client:
            gate = asyncio.Semaphore(16)

            async def one(path: str, body: Any, headers: dict[str, str]) -> None:
                content = body if isinstance(body, bytes) else json.dumps(body).encode()
                async with gate:
                    response = await client.post(path, content=content, headers=headers)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code >= 500:
                    failures.append(f"{path} {content[:300]!r} -> {response.status_code} {response.text[:300]}")
                elif response.status_code != 200:
                    payload = response.json()
                    assert "error" in payload, payload

            await asyncio.gather(*(one(*request) for request in requests))

    start = time.time()
    asyncio.run(fire())
    assert not failures, failures[:5]
    assert sum(statuses.values()) == 2000 and statuses.get(200, 0) > 50 and statuses.get(400, 0) > 500, statuses
    assert time.time() - start < 120
    assert post(server, CHAT, execution[1], good_chat()).status_code == 200
    assert httpx.get(server.base_url + "/health", timeout=10).json()["status"] == "ok"


def test_a_prompt_beyond_the_model_window_is_a_clear_400_in_each_api(server, proxy, execution) -> None:
    window = proxy.context_window()
    assert window is not None
    text = "return value of the test file " * (window // 5)
    tokens = proxy.template.count_tokens(proxy_conversation(text))
    assert tokens > window, "the prompt must be longer than the window for this test"
    body = good_chat(messages=[{"role": "user", "content": text}])
    openai_error(post(server, CHAT, execution[1], body), 400, "prompt is too long", f"context window is {window}")
    body = good_messages(messages=[{"role": "user", "content": text}])
    anthropic_error(post(server, MESSAGES, execution[1], body), 400, "invalid_request_error", "prompt is too long")
    assert post(server, CHAT, execution[1], good_chat()).status_code == 200  # and the proxy keeps serving
    assert proxy.records(execution[0])[-1].meta["new_tokens"] > 0


def proxy_conversation(text: str):
    from gyre.chat import Conversation, Message

    return Conversation((Message("user", text),))


@pytest.mark.slow
def test_a_kept_alive_connection_outlives_a_pooled_clients_idle_expiry(server) -> None:
    """A client's pool keeps an idle connection ~5 s (httpx) and then may reuse it: the proxy must not be the
    side that closes first (uvicorn's own default is 5 s, and a request sent as it closes dies with a reset:
    a fuzz run under load lost one that way). The same socket serves a request after 6 idle seconds."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        connection.request("GET", "/health")
        assert connection.getresponse().read() and connection.sock is not None
        first = connection.sock
        time.sleep(6)
        connection.request("GET", "/health")  # http.client never reconnects an open socket: a close would raise
        response = connection.getresponse()
        assert response.status == 200 and response.read()
        assert connection.sock is first
    finally:
        connection.close()
