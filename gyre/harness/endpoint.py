"""The model endpoint as an execution sees it: open a key, count calls, close and collect the records.

Executions depend on this small interface rather than on the proxy's internals, so a training driver
can hand them a proxy in its own process (`ProxyEndpoint`) today and a remote one later.

Thread safety: the proxy's router holds asyncio objects bound to the server's event loop, so opening
and closing executions runs *on that loop* (`ProxyServer.call`); these methods block and are meant to be
called from a worker thread (`asyncio.to_thread`), never from the server's own loop.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from gyre.protocol import CallRecord

if TYPE_CHECKING:
    from gyre.proxy.server import ProxyServer


class ModelEndpoint(Protocol):
    openai_base_url: str
    anthropic_base_url: str

    def open(self, execution_id: str) -> str:
        """Start accepting calls for ``execution_id``; returns its API key."""
        ...

    def calls(self, execution_id: str) -> int:
        """Calls recorded so far for an open execution (0 once closed or unknown)."""
        ...

    def revoke(self, key: str) -> None:
        """Make the key stop working as soon as possible, without blocking (the caller is an event loop)."""
        ...

    def close(self, key: str, execution_id: str) -> list[CallRecord]:
        """Close the key (later calls get 401; fine if revoked already), wait for calls still in flight
        to be recorded, and return every record of the execution."""
        ...


class ProxyEndpoint:
    """A `ProxyServer` running in this process (see gyre.proxy.server)."""

    def __init__(self, server: ProxyServer, *, settle_timeout_s: float = 30.0) -> None:
        self.server = server
        self.proxy = server.proxy
        self.openai_base_url = server.openai_base_url
        self.anthropic_base_url = server.anthropic_base_url
        self.max_body_bytes = server.proxy.config.max_body_bytes  # the gates refuse bigger bodies themselves
        self.settle_timeout_s = settle_timeout_s
        self._open: dict[str, Any] = {}  # execution id -> the proxy's execution state (outlives a revoke)

    def open(self, execution_id: str) -> str:
        async def _open() -> str:
            key = self.proxy.open_execution(execution_id)
            self._open[execution_id] = self.proxy.executions.by_id(execution_id)
            return key

        return self.server.call(_open())

    def calls(self, execution_id: str) -> int:
        execution = self._open.get(execution_id)
        return execution.calls if execution is not None else 0

    def revoke(self, key: str) -> None:
        if self.server.loop is not None:
            self.server.loop.call_soon_threadsafe(self._close_quietly, key)

    def close(self, key: str, execution_id: str) -> list[CallRecord]:
        execution = self._open.pop(execution_id, None)

        async def _close() -> None:
            self._close_quietly(key)

        self.server.call(_close())
        if execution is not None:
            self._settle(execution, execution_id)
        return self.proxy.records(execution_id)

    def _close_quietly(self, key: str) -> None:
        try:
            self.proxy.close_execution(key)
        except KeyError:  # revoked already
            pass

    def _settle(self, execution: Any, execution_id: str) -> None:
        """Wait for calls still in flight to land in the log (bounded by ``settle_timeout_s``).

        A harness killed mid-call leaves that call running in the proxy; it is still recorded (a valid
        sample of the policy, and nothing recorded may be lost). The proxy lowers ``inflight`` just
        before it writes the record, so a short second look covers that gap in practice; an exact
        answer needs the proxy to say when an execution is fully drained (asked for in the report).
        """
        deadline = time.monotonic() + self.settle_timeout_s

        def drained() -> bool:
            return execution.inflight == 0 and len(self.proxy.records(execution_id)) >= execution.calls

        while time.monotonic() < deadline:
            if drained():
                time.sleep(0.05)
                if drained():
                    return
            time.sleep(0.05)
