"""The model endpoint as an execution sees it: open a key, count calls, close and collect the records.

Executions depend on this small interface rather than on the proxy's internals, so a training driver
can hand them a proxy in its own process (`ProxyEndpoint`) today and a remote one later.

Thread safety: the proxy's router holds asyncio objects bound to the server's event loop, so opening
and closing executions runs *on that loop* (`ProxyServer.call`); these methods block and are meant to be
called from a worker thread (`asyncio.to_thread`), never from the server's own loop.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

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

    def close(self, key: str, execution_id: str) -> list[CallRecord]:
        """Close the key (later calls get 401), wait for calls still in flight to be recorded, and
        return every record of the execution."""
        ...


class ProxyEndpoint:
    """A `ProxyServer` running in this process (see gyre.proxy.server)."""

    def __init__(self, server: ProxyServer, *, settle_timeout_s: float = 30.0) -> None:
        self.server = server
        self.proxy = server.proxy
        self.openai_base_url = server.openai_base_url
        self.anthropic_base_url = server.anthropic_base_url
        self.settle_timeout_s = settle_timeout_s

    def open(self, execution_id: str) -> str:
        async def _open() -> str:
            return self.proxy.open_execution(execution_id)

        return self.server.call(_open())

    def calls(self, execution_id: str) -> int:
        execution = self.proxy.executions.by_id(execution_id)
        return execution.calls if execution is not None else 0

    def close(self, key: str, execution_id: str) -> list[CallRecord]:
        execution = self.proxy.executions.by_id(execution_id)

        async def _close() -> None:
            self.proxy.close_execution(key)

        self.server.call(_close())
        if execution is not None:
            self._settle(execution, execution_id)
        return self.proxy.records(execution_id)

    def _settle(self, execution: object, execution_id: str) -> None:
        """A harness killed mid-call leaves its call running in the proxy; that call is still recorded
        (a valid sample of the policy), so wait until nothing is in flight and the log holds every
        counted call. ``inflight`` drops before the record is written and ``calls`` rises after, so the
        two conditions together cover the whole window."""
        deadline = time.monotonic() + self.settle_timeout_s
        while time.monotonic() < deadline:
            if getattr(execution, "inflight", 0) == 0 and len(self.proxy.records(execution_id)) >= getattr(execution, "calls", 0):
                time.sleep(0.05)  # the gap between inflight -= 1 and the record's write
                if getattr(execution, "inflight", 0) == 0 and len(self.proxy.records(execution_id)) >= getattr(execution, "calls", 0):
                    return
            time.sleep(0.05)
