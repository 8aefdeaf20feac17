"""Server-sent events: encoding, and waiting for a call while keeping the stream alive.

Engines return a whole generation at once, so a streamed response is: the opening events (sent before
generation starts, so clients see headers and a first event at once), keep-alive pings while the model
runs (long CPU generations would otherwise trip client read timeouts), then the content in chunks.
If the client disconnects, the server cancels the response generator; that cancels the call, and the
engine aborts it (nothing is recorded for a call whose response nobody received).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from gyre.proxy.errors import ProxyError
from gyre.proxy.service import CallResult, PreparedCall, Proxy

KEEPALIVE_S = 10.0


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def data_event(data: Any) -> bytes:
    """An unnamed event (OpenAI chat/completions streams)."""
    return f"data: {dumps(data)}\n\n".encode()


def named_event(name: str, data: Any) -> bytes:
    """A named event (OpenAI Responses and Anthropic Messages streams)."""
    return f"event: {name}\ndata: {dumps(data)}\n\n".encode()


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


async def run_streaming(proxy: Proxy, call: PreparedCall, ping: bytes) -> AsyncIterator[bytes | CallResult | ProxyError]:
    """Yield ``ping`` every ``KEEPALIVE_S`` while the call runs, then its result (or its ProxyError)."""
    task = asyncio.ensure_future(proxy.run(call))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=KEEPALIVE_S)
            if done:
                break
            yield ping
        try:
            result: CallResult | ProxyError = task.result()
        except ProxyError as error:
            result = error
        except Exception as error:  # noqa: BLE001 - the stream has started: report it in-band
            result = ProxyError("internal", f"internal error: {type(error).__name__}: {error}")
        yield result
    finally:
        if not task.done():
            task.cancel()
