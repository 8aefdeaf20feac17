"""The host end of an execution's way to the proxy: a Unix socket that lets through only API calls made
with that execution's own key.

An agent's sandbox has its own network namespace (nothing of the host's network is reachable); the one
socket bound into it is its gate's (`Gate.socket_path`), and a forwarder inside (`gyre.envs._forward`)
exposes it on the sandbox's own loopback at the proxy's address, so harnesses use the URLs they are given.
The agent can talk to the socket directly, so every rule is enforced here, on the host:

- each request is parsed (h11) and must be one of the proxy's API routes (`API_ROUTES`, exact paths; a
  query string is allowed), in origin form, carrying the execution's key in every credential header;
  anything else gets a JSON error naming the problem and the connection is closed;
- an accepted request is re-sent to the proxy with ``connection: close`` (one request per connection:
  nothing can be smuggled behind it) and the response is relayed back as it comes (streams included);
  a client that goes away closes the upstream connection, so the proxy aborts the call;
- a request head must be complete within ``head_timeout_s`` of the connection's start (a deadline, not an
  idle timer: trickling a byte at a time does not extend it) and body bytes keep coming within it; heads
  are at most 64 KiB (`MAX_HEAD_BYTES`, counted exactly: 431 beyond) and bodies at most
  ``max_body_bytes`` (the proxy's own limit: refused here with its 413 rather than by a reset mid-upload);
- an execution has at most ``max_connections`` at once, so one sandbox cannot exhaust the host's
  descriptors; when they are all taken, a new connection displaces the oldest one still sending its head
  (``connections_displaced``), so half-sent heads cannot keep the execution's own calls out, and only
  when none is in that state is the new one closed (``connections_over_limit``).

All gates of a process run on one private event loop thread, started on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11

log = logging.getLogger(__name__)

API_ROUTES = frozenset(
    {
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models"),
    }
)
SOCKET_NAME = "proxy.sock"
MAX_HEAD_BYTES = 65536
# Hop-by-hop and framing headers: the gate sets framing and ``connection`` itself.
DROPPED_HEADERS = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade", b"expect",
     b"transfer-encoding", b"content-length"}
)
READ_BYTES = 16384  # small reads, so h11's head limit applies within a read of its size
DISCARD_BYTES, DISCARD_S = 4 << 20, 2.0  # what is read and dropped after a refusal, at most
_REASONS = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 408: "Request Timeout", 413: "Payload Too Large",
            431: "Request Header Fields Too Large", 502: "Bad Gateway"}


class Refused(Exception):
    """A request the gate does not let through: answered with ``status`` and ``message``."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason  # counted in `GateStats.refused`
        self.message = message


@dataclass
class GateStats:
    """What one gate saw: requests relayed, refused (by reason), connections closed on accept."""

    relayed: int = 0
    refused: Counter = field(default_factory=Counter)
    refused_routes: list[str] = field(default_factory=list)  # the first few "METHOD target" refused
    connections_over_limit: int = 0
    connections_displaced: int = 0  # half-sent heads closed to make room for a new connection
    active: int = 0


def upstream_of(base_url: str) -> tuple[str, int]:
    """(host, port) of an ``http://host:port[/v1]`` base URL."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"the proxy's base URL must be http://HOST:PORT[/...], got {base_url!r}")
    return parts.hostname, parts.port


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` on the gates' loop and wait for it (from any thread but that loop's)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="gyre-gate", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coroutine, _loop).result()


FOLDER_PREFIX = "gyre-gate-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _pid_namespace() -> str:
    """This process's PID namespace (pids of other namespaces, e.g. another container sharing /tmp, mean
    nothing here)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _folder_prefix() -> str:
    return f"{FOLDER_PREFIX}{_pid_namespace()}-{os.getpid()}-"


def _remove_orphaned_folders(root: str) -> list[str]:
    """Remove the gate folders in ``root`` left by processes of this PID namespace that are gone (a SIGKILLed
    driver never closes its gates); returns their names."""
    removed = []
    namespace = _pid_namespace()
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            parts = name[len(FOLDER_PREFIX):].split("-")
            if not name.startswith(FOLDER_PREFIX) or len(parts) != 3 or parts[0] != namespace or not parts[1].isdigit():
                continue
            if not _alive(int(parts[1])):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                removed.append(name)
    return removed


@functools.cache
def _remove_orphaned_folders_once() -> None:
    _remove_orphaned_folders(tempfile.gettempdir())


class GateServer:
    """Opens gates to one upstream proxy (``upstream_host:upstream_port``)."""

    def __init__(self, upstream_host: str, upstream_port: int, *, head_timeout_s: float = 60.0, max_connections: int = 32,
                 max_body_bytes: int | None = None) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.head_timeout_s = head_timeout_s
        self.max_connections = max_connections
        self.max_body_bytes = max_body_bytes

    def open(self, key: str) -> Gate:
        """A fresh gate for the execution whose key is ``key`` (blocking; call from a worker thread)."""
        _remove_orphaned_folders_once()
        # Short (a socket path must fit in 108 bytes) and named by its process, so that the folders of a
        # process killed before it could close its gates are found and removed later. mkdtemp's own part
        # has no "-" (letters, digits, "_").
        folder = tempfile.mkdtemp(prefix=_folder_prefix())
        gate = Gate(self, key, folder)
        try:
            gate._server = _run(asyncio.start_unix_server(gate._serve, path=gate.socket_path))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return gate


class Gate:
    """One execution's socket (``socket_path`` in the folder ``folder``, bound into its sandbox)."""

    def __init__(self, server: GateServer, key: str, folder: str) -> None:
        self.server = server
        self.key = key
        self.folder = folder
        self.socket_path = os.path.join(folder, SOCKET_NAME)
        self.stats = GateStats()
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._heads: dict[asyncio.Task[None], None] = {}  # connections still sending their head, oldest first
        self._closed = False

    def close(self) -> None:
        """Stop accepting, cut every open connection and remove the socket. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._server is not None:
                _run(self._shut())
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    async def _shut(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------------ one connection

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats = self.stats
        if stats.active >= self.server.max_connections:
            if not self._heads:
                stats.connections_over_limit += 1
                writer.close()
                return
            oldest = next(iter(self._heads))
            del self._heads[oldest]
            oldest.cancel()  # frees its slot when it ends; counted here so the new one fits now
            stats.connections_displaced += 1
            stats.active -= 1
            self._tasks.discard(oldest)
        stats.active += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._heads[task] = None
        try:
            await self._relay(reader, writer, task)
        except Refused as refused:
            stats.refused[refused.reason] += 1
            # (cancelled while answering: the gate is closing or displaced it; it ends like any cancelled connection)
            with contextlib.suppress(ConnectionError, OSError, TimeoutError, asyncio.CancelledError):
                writer.write(_error_response(refused.status, refused.message))
                await writer.drain()
                writer.write_eof()
                await asyncio.wait_for(_discard(reader, DISCARD_BYTES), DISCARD_S)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            if task in self._tasks:  # (a displaced connection was counted out when it was displaced)
                stats.active -= 1
                self._tasks.discard(task)
            self._heads.pop(task, None)
            writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, task: asyncio.Task[None]) -> None:
        incoming = _CountingConnection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        deadline = asyncio.get_running_loop().time() + self.server.head_timeout_s
        request = await self._next_event(incoming, reader, deadline)
        self._heads.pop(task, None)
        if not isinstance(request, h11.Request):
            raise Refused(400, "malformed", "gyre gate: no HTTP request received")
        head_bytes = incoming.received - len(incoming.trailing_data[0])
        if head_bytes > MAX_HEAD_BYTES:
            raise Refused(431, "head_too_large", f"gyre gate: request head is {head_bytes} bytes; the limit is "
                                                 f"{MAX_HEAD_BYTES}")
        method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
        path = target.split("?", 1)[0]
        if (method, path) not in API_ROUTES:
            if len(self.stats.refused_routes) < 10:
                self.stats.refused_routes.append(f"{method} {target[:200]}")
            raise Refused(404, "route", f"gyre gate: {method} {target[:200]} is not an API route of the proxy "
                                        f"(allowed: {', '.join(sorted(f'{m} {p}' for m, p in API_ROUTES))})")
        self._check_key(request.headers)
        limit = self.server.max_body_bytes
        declared = [value for name, value in request.headers if name == b"content-length"]
        if limit is not None and declared and int(declared[0]) > limit:
            raise Refused(413, "too_large", f"gyre gate: request body is {int(declared[0])} bytes; the limit is {limit} bytes "
                                            "(proxy.max_body_bytes)")
        upstream_reader, upstream_writer = await self._connect()
        try:
            await self._send_request(request, incoming, reader, writer, upstream_writer)
            await self._relay_response(upstream_reader, reader, writer)
        finally:
            upstream_writer.close()
        self.stats.relayed += 1

    def _check_key(self, headers: Any) -> None:
        credentials = []
        for name, value in headers:
            if name == b"x-api-key":
                credentials.append(value.strip())
            elif name == b"authorization":
                scheme, _, token = value.partition(b" ")
                credentials.append(token.strip() if scheme.lower() == b"bearer" else b"")
        if not credentials:
            raise Refused(401, "no_key", "gyre gate: no API key (send this execution's key as "
                                         "'Authorization: Bearer <key>' or 'x-api-key: <key>')")
        if any(credential != self.key.encode() for credential in credentials):
            raise Refused(401, "wrong_key", "gyre gate: only this execution's own API key is accepted here")

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(*self.server.upstream)
        except OSError as error:
            raise Refused(502, "upstream", f"gyre gate: the proxy is not reachable: {error}") from error

    async def _send_request(self, request: h11.Request, incoming: h11.Connection, reader: asyncio.StreamReader,
                            client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        """Re-send the request to the proxy, body as it arrives; the proxy's own limits (size) apply."""
        chunked = any(name == b"transfer-encoding" for name, _ in request.headers)
        headers = [(name, value) for name, value in request.headers if name not in DROPPED_HEADERS]
        if chunked:
            headers.append((b"transfer-encoding", b"chunked"))
        else:
            headers += [(name, value) for name, value in request.headers if name == b"content-length"][:1]
        headers.append((b"connection", b"close"))
        outgoing = h11.Connection(h11.CLIENT)
        limit, sent = self.server.max_body_bytes, 0
        try:
            upstream.write(outgoing.send(h11.Request(method=request.method, target=request.target, headers=headers)))
            while True:
                if incoming.they_are_waiting_for_100_continue:  # ``expect`` is not passed on: answer it here
                    client.write(incoming.send(h11.InformationalResponse(status_code=100, headers=[])))
                event = await self._next_event(incoming, reader)
                if isinstance(event, h11.Data):
                    sent += len(event.data)
                    if limit is not None and sent > limit:
                        raise Refused(413, "too_large", f"gyre gate: request body exceeds the limit of {limit} bytes "
                                                        "(proxy.max_body_bytes)")
                    upstream.write(outgoing.send(h11.Data(data=bytes(event.data))))
                    await upstream.drain()
                elif isinstance(event, h11.EndOfMessage):
                    upstream.write(outgoing.send(h11.EndOfMessage()))
                    await upstream.drain()
                    return
                else:
                    raise ConnectionResetError("the client went away mid-request")
        except (ConnectionError, OSError):
            return  # the proxy stopped reading (e.g. a 413): relay what it answered
        except h11.LocalProtocolError as error:
            raise Refused(400, "malformed", f"gyre gate: malformed request body: {error}") from error

    async def _next_event(self, connection: h11.Connection, reader: asyncio.StreamReader,
                          deadline: float | None = None) -> Any:
        """The next h11 event, reading as needed; a 408 when the client is too slow (no data for
        ``head_timeout_s``, or not done by ``deadline``), 400 when malformed."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as error:
                raise Refused(400, "malformed", f"gyre gate: malformed HTTP request: {error}") from error
            if event is not h11.NEED_DATA:
                return event
            wait = self.server.head_timeout_s if deadline is None else deadline - loop.time()
            try:
                if wait <= 0:
                    raise TimeoutError
                data = await asyncio.wait_for(reader.read(READ_BYTES), wait)
            except TimeoutError as error:
                what = "the request head was not complete" if deadline is not None else "no data"
                raise Refused(408, "slow", f"gyre gate: {what} within {self.server.head_timeout_s:g}s") from error
            connection.receive_data(data)

    async def _relay_response(self, upstream: asyncio.StreamReader, client_reader: asyncio.StreamReader,
                              client: asyncio.StreamWriter) -> None:
        """Copy the proxy's answer to the client until the proxy closes; stop early if the client leaves."""
        async def copy() -> None:
            while data := await upstream.read(65536):
                client.write(data)
                await client.drain()

        async def client_gone() -> None:
            while await client_reader.read(65536):  # bytes after the request (pipelining) are ignored
                pass

        copying, watching = asyncio.ensure_future(copy()), asyncio.ensure_future(client_gone())
        try:
            await asyncio.wait({copying, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (copying, watching):
                task.cancel()
            await asyncio.gather(copying, watching, return_exceptions=True)


class _CountingConnection(h11.Connection):
    """h11's server side, counting the bytes received: h11 bounds an incomplete head, not a complete one
    that arrived with its last read, so the head's exact size is checked from this count."""

    received = 0

    def receive_data(self, data: bytes) -> None:
        self.received += len(data)
        super().receive_data(data)


async def _discard(reader: asyncio.StreamReader, limit: int) -> None:
    """Read what the client is still sending (bounded), so that closing does not reset the connection
    and lose the error response before the client has read it."""
    while limit > 0 and (data := await reader.read(READ_BYTES)):
        limit -= len(data)


def _error_response(status: int, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "gyre_gate_error", "code": status}}).encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode() + body
