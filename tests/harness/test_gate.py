"""The gate (the host end of an agent's only socket) against hostile clients, with the live proxy behind it.

Everything here is what an agent can send to the socket bound into its sandbox: the gate must relay API
calls made with the execution's key (streams included, a client that leaves aborts its call), refuse the
rest with a clear error, bound slow and numerous connections, and keep serving.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

from gyre.harness.gate import Gate, GateServer, upstream_of

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture
def gate(server) -> Iterator[tuple[Gate, str, str]]:
    """(gate, execution id, key) of a fresh execution behind a gate with short limits."""
    execution_id = f"gate-{time.monotonic_ns()}"
    key = server.proxy.open_execution(execution_id)
    limits = {"head_timeout_s": 0.5, "max_connections": 4, "max_body_bytes": 1024 * 1024}
    opened = GateServer(*upstream_of(server.base_url), **limits).open(key)
    yield opened, execution_id, key
    opened.close()
    with contextlib.suppress(KeyError):
        server.proxy.close_execution(key)


def connect(gate: Gate) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(gate.socket_path)
    return sock


def exchange(gate: Gate, payload: bytes) -> bytes:
    """Send ``payload``, read until the gate closes the connection."""
    with connect(gate) as sock:
        with contextlib.suppress(BrokenPipeError):  # the gate may answer and close before reading it all
            sock.sendall(payload)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def request(method: str, target: str, key: str | None, body: bytes = b"", extra: bytes = b"") -> bytes:
    head = f"{method} {target} HTTP/1.1\r\nhost: sandbox\r\n".encode()
    if key is not None:
        head += f"authorization: Bearer {key}\r\n".encode()
    if body:
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n".encode()
    return head + extra + b"\r\n" + body


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def test_api_calls_with_the_own_key_go_through(server, gate) -> None:
    opened, execution_id, key = gate
    body = json.dumps(CHAT).encode()
    response = exchange(opened, request("POST", "/v1/chat/completions", key, body))
    assert status_of(response) == 200 and b'"chat.completion"' in response
    anthropic = json.dumps({"model": "c", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}).encode()
    extra = f"x-api-key: {key}\r\n".encode()
    assert status_of(exchange(opened, request("POST", "/v1/messages?beta=true", None, anthropic, extra))) == 200
    assert status_of(exchange(opened, request("GET", "/v1/models", key))) == 200
    chunked = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer " + key.encode()
               + b"\r\ntransfer-encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    assert status_of(exchange(opened, chunked)) == 200
    assert len(server.proxy.records(execution_id)) == 3
    assert opened.stats.relayed == 4


@pytest.mark.parametrize(
    ("payload", "status", "needle"),
    [
        (request("GET", "/health", "KEY"), 404, b"not an API route"),
        (request("POST", "/v1/chat/completions", None, b"{}"), 401, b"no API key"),
        (request("POST", "/v1/chat/completions", "gyre-someone-else", b"{}"), 401, b"own API key"),
        (request("POST", "/v1/chat/completions", "KEY", b"{}", b"x-api-key: gyre-someone-else\r\n"), 401, b"own API key"),
        (request("GET", "http://127.0.0.1:1/health", "KEY"), 404, b"not an API route"),
        (request("GET", "/v1/../health", "KEY"), 404, b"not an API route"),
        (request("POST", "/v1/chat/completions/../../health", "KEY"), 404, b"not an API route"),
        (b"GET /v1/models\xff\xfe HTTP/1.1\r\nhost: x\r\n\r\n", 400, b"malformed"),
        (b"HELLO\r\n\r\n", 400, b"malformed"),
        (b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 100_000 + b"\r\n\r\n", 400, b"malformed"),
        (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello", 400, b"malformed"),
    ],
    ids=["health", "no-key", "other-key", "two-keys", "absolute-form", "dot-segments", "dot-segments-post",
         "invalid-utf8", "garbage", "huge-header", "double-length"],
)
def test_everything_else_is_refused_with_a_reason(server, gate, payload: bytes, status: int, needle: bytes) -> None:
    opened, execution_id, key = gate
    response = exchange(opened, payload.replace(b"Bearer KEY", b"Bearer " + key.encode()))
    assert status_of(response) == status and needle in response, response[:300]
    assert b'"router"' not in response  # nothing of /health leaked
    assert server.proxy.records(execution_id) == [] and opened.stats.relayed == 0


def test_smuggled_and_pipelined_requests_never_reach_the_proxy(server, gate) -> None:
    opened, _, key = gate
    body = json.dumps(CHAT).encode()
    hidden = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
    pipelined = request("POST", "/v1/chat/completions", key, body) + hidden
    smuggled = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer " + key.encode()
                + f"\r\ncontent-length: {len(body) + 100}\r\ntransfer-encoding: chunked\r\n\r\n".encode()
                + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n" + hidden)
    for payload in (pipelined, smuggled):
        response = exchange(opened, payload)
        assert status_of(response) == 200 and b'"router"' not in response and response.count(b"HTTP/1.1 ") == 1


def test_oversized_bodies_get_a_413(server, gate) -> None:
    opened, execution_id, key = gate
    big = json.dumps({**CHAT, "messages": [{"role": "user", "content": "x" * (2 * 1024 * 1024)}]}).encode()
    response = exchange(opened, request("POST", "/v1/chat/completions", key, big))
    assert status_of(response) == 413 and b"proxy.max_body_bytes" in response, response[:300]
    chunked = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer " + key.encode()
               + b"\r\ntransfer-encoding: chunked\r\n\r\n" + b"".join(f"{65536:x}\r\n".encode() + b"y" * 65536 + b"\r\n" for _ in range(20)))
    response = exchange(opened, chunked)
    assert status_of(response) == 413 and b"exceeds the limit" in response, response[:300]
    assert server.proxy.records(execution_id) == []


def test_slow_clients_and_connection_floods_are_bounded(server, gate) -> None:
    opened, _, key = gate
    start = time.monotonic()
    slow = exchange(opened, b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")  # then nothing more
    assert status_of(slow) == 408 and time.monotonic() - start < 5
    # A head that never ends, and a body that trickles: cut after head_timeout_s without data.
    with connect(opened) as sock:
        sock.sendall(request("POST", "/v1/chat/completions", key, b"x" * 10)[:-5])
        time.sleep(1.0)
        assert status_of(sock.recv(65536)) == 408
    # Connections in their body (heads sent) fill the limit (max_connections=4): one more is closed on accept.
    held = [connect(opened) for _ in range(4)]
    try:
        for sock in held:
            sock.sendall(request("POST", "/v1/chat/completions", key, b"x" * 100)[:-100])
        time.sleep(0.1)
        with connect(opened) as extra, contextlib.suppress(BrokenPipeError, ConnectionResetError):
            # Closed on accept: the send itself may already meet the closed socket.
            extra.sendall(request("GET", "/v1/models", key))
            assert extra.recv(100) == b""
        assert opened.stats.connections_over_limit >= 1
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.7)  # the idle ones time out and free their slots
    assert status_of(exchange(opened, request("GET", "/v1/models", key))) == 200


def test_a_head_trickled_byte_by_byte_is_cut_at_the_deadline(server, gate) -> None:
    """Each byte arrives within head_timeout_s of the last, yet the head must be done within head_timeout_s
    of the connection's start (an idle timer would keep it open for as long as the client keeps sending)."""
    opened, _, key = gate
    head = request("POST", "/v1/chat/completions", key, b"x" * 10)
    with connect(opened) as sock:
        start = time.monotonic()
        for byte in head[:-15]:
            sock.sendall(bytes([byte]))
            if select.select([sock], [], [], 0.1)[0]:  # the gate answered
                break
        answered = time.monotonic() - start
        answer = sock.recv(65536)
        assert status_of(answer) == 408 and b"not complete" in answer
        assert answered < opened.server.head_timeout_s + 1.0, answered


def test_half_sent_heads_do_not_keep_the_executions_calls_out(server, gate) -> None:
    """All connections held by heads that never end: a new call displaces the oldest and goes through."""
    opened, _, key = gate
    held = [connect(opened) for _ in range(4)]  # the limit, each with a half-sent head
    try:
        for sock in held:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n")
        time.sleep(0.1)
        assert status_of(exchange(opened, request("GET", "/v1/models", key))) == 200
        assert opened.stats.connections_displaced >= 1 and opened.stats.connections_over_limit == 0
    finally:
        for sock in held:
            sock.close()


def test_the_head_limit_is_exact(server, gate) -> None:
    opened, _, key = gate
    padding = b"x-pad: " + b"a" * 1000 + b"\r\n"
    base = request("GET", "/v1/models", key)
    fits = base[:-2] + padding * ((65536 - len(base)) // len(padding)) + b"\r\n"
    assert len(fits) <= 65536 and status_of(exchange(opened, fits)) == 200
    over = base[:-2] + padding * 70 + b"\r\n"  # ~70 KiB, sent whole: h11 alone would take it
    answer = exchange(opened, over)
    assert status_of(answer) == 431 and b"65536" in answer


def test_a_client_leaving_mid_stream_aborts_its_call(server, gate) -> None:
    opened, execution_id, key = gate
    engines = [cell.engine for cell in server.proxy.router.cells.values()]
    aborted = sum(e.stats()["calls_aborted"] for e in engines)
    body = json.dumps({**CHAT, "max_tokens": 4000, "stream": True}).encode()
    with connect(opened) as sock:
        sock.sendall(request("POST", "/v1/chat/completions", key, body))
        first = sock.recv(65536)
        assert status_of(first) == 200 and b"text/event-stream" in first
    deadline = time.monotonic() + 20
    while sum(e.stats()["calls_aborted"] for e in engines) == aborted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sum(e.stats()["calls_aborted"] for e in engines) > aborted
    assert server.proxy.records(execution_id) == []  # nobody received that call
    assert status_of(exchange(opened, request("POST", "/v1/chat/completions", key, json.dumps(CHAT).encode()))) == 200


def test_closing_the_gate_removes_its_socket(server) -> None:
    key = server.proxy.open_execution(f"gate-close-{time.monotonic_ns()}")
    opened = GateServer(*upstream_of(server.base_url)).open(key)
    path = opened.socket_path
    opened.close()
    opened.close()
    with pytest.raises(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
    server.proxy.close_execution(key)


def test_folders_of_processes_that_are_gone_are_removed(tmp_path) -> None:
    import os
    import subprocess
    import sys

    from gyre.harness.gate import _pid_namespace, _remove_orphaned_folders

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid now names no process (a killed driver's folders look the same)
    namespace = _pid_namespace()
    orphaned = tmp_path / f"gyre-gate-{namespace}-{gone.pid}-abc123"
    live = tmp_path / f"gyre-gate-{namespace}-{os.getpid()}-def456"
    other_namespace = tmp_path / f"gyre-gate-1{namespace}-{gone.pid}-ghi789"  # another container's: left alone
    unrelated = tmp_path / "gyre-gate-notapid"
    for folder in (orphaned, live, other_namespace, unrelated):
        folder.mkdir()
    assert _remove_orphaned_folders(str(tmp_path)) == [orphaned.name]
    assert not orphaned.exists() and live.exists() and other_namespace.exists() and unrelated.exists()


def test_a_gate_folder_is_named_by_its_process(server) -> None:
    import os

    from gyre.harness.gate import _pid_namespace

    key = server.proxy.open_execution(f"gate-name-{time.monotonic_ns()}")
    opened = GateServer(*upstream_of(server.base_url)).open(key)
    try:
        name = os.path.basename(opened.folder)
        assert name.startswith(f"gyre-gate-{_pid_namespace()}-{os.getpid()}-") and len(opened.socket_path) < 108
    finally:
        opened.close()
        server.proxy.close_execution(key)


def test_closing_the_gate_while_it_answers_a_refusal_logs_no_error(server, caplog) -> None:
    """A refused connection whose client keeps its socket open is drained briefly after the answer; closing
    the gate then cancels that drain, which must end the connection quietly (it printed an asyncio
    'Exception in callback ... CancelledError' traceback per connection)."""
    key = server.proxy.open_execution(f"gate-refusing-{time.monotonic_ns()}")
    opened = GateServer(*upstream_of(server.base_url)).open(key)
    padding = b"x-pad: " + b"a" * 1000 + b"\r\n"
    clients = [connect(opened) for _ in range(3)]
    for sock in clients:  # heads over the limit: each answered 431, then drained while the client stays
        sock.sendall(request("GET", "/v1/models", key)[:-2] + padding * 70 + b"\r\n")
        assert status_of(sock.recv(65536)) == 431
    with caplog.at_level("ERROR", logger="asyncio"):
        opened.close()
        time.sleep(0.2)
    for sock in clients:
        sock.close()
    server.proxy.close_execution(key)
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
