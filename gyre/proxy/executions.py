"""Executions as the proxy knows them: an API key per execution and the chat state of its calls.

The key is the only identity a black-box harness carries, so it is what names the execution. Keys are
random (unguessable) and die with ``close``: a harness that outlives its execution gets 401s, and its
late calls cannot leak into another execution's records.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from dataclasses import dataclass, field

from gyre.chat import AgentClassifier, ChatTemplate, PromptBuilder
from gyre.proxy.errors import ProxyError
from gyre.proxy.recorder import check_execution_id


@dataclass(eq=False)
class OpenExecution:
    """An execution while its API key is open: the proxy's per-execution chat state (its prompt builder and
    agent-role classifier) and call counters. Not ``gyre.protocol.Execution``, the finished execution
    with its calls and reward that the trajectory processor trains on."""

    execution_id: str
    key: str
    builder: PromptBuilder
    roles: AgentClassifier
    calls: int = 0  # calls recorded so far
    inflight: int = 0  # calls started and not yet recorded or failed
    count_tokens_calls: int = 0  # count_tokens requests answered or refused for size (not recorded calls)
    # Held while a request of this execution is parsed and planned (maybe on a worker thread) and while a
    # finished call is committed: the builder's state is touched by one of them at a time, and one
    # execution's heavy requests queue behind each other instead of taking every thread.
    chat_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _seq: itertools.count = field(default_factory=itertools.count)
    _tag: str = field(default_factory=lambda: secrets.token_hex(3))

    def next_call_id(self) -> str:
        """Ordered within the execution; the per-open tag keeps ids unique across re-opens of the same id."""
        return f"{self.execution_id}:{self._tag}-{next(self._seq):05d}"


class ExecutionRegistry:
    def __init__(self, template: ChatTemplate, *, history_calls: int, summary_pattern: str | None) -> None:
        self.template = template
        self.history_calls = history_calls
        self.summary_pattern = summary_pattern
        self._by_key: dict[str, OpenExecution] = {}
        self._by_id: dict[str, OpenExecution] = {}

    def open(self, execution_id: str) -> str:
        """A fresh API key naming ``execution_id`` (which must not be open already)."""
        check_execution_id(execution_id)
        if execution_id in self._by_id:
            raise ValueError(f"execution {execution_id!r} is already open; close it first")
        key = f"gyre-{secrets.token_urlsafe(24)}"
        execution = OpenExecution(
            execution_id,
            key,
            PromptBuilder(self.template, max_calls=self.history_calls),
            AgentClassifier(self.summary_pattern),
        )
        self._by_key[key] = execution
        self._by_id[execution_id] = execution
        return key

    def close(self, key: str) -> OpenExecution:
        execution = self._by_key.pop(key, None)
        if execution is None:
            raise KeyError(f"no open execution has key {mask_key(key)}")
        del self._by_id[execution.execution_id]
        return execution

    def get(self, key: str | None) -> OpenExecution:
        """The execution for a request's key; a 401 naming the problem otherwise."""
        if not key:
            raise ProxyError(
                "authentication",
                "no API key: send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>' "
                "(each execution gets its own key from the proxy)",
            )
        execution = self._by_key.get(key)
        if execution is None:
            raise ProxyError("authentication", f"invalid API key {mask_key(key)}: no open execution has it (ended or unknown)")
        return execution

    def by_id(self, execution_id: str) -> OpenExecution | None:
        return self._by_id.get(execution_id)

    def __len__(self) -> int:
        return len(self._by_key)


def mask_key(key: str) -> str:
    return f"'{key[:7]}...{key[-4:]}'" if len(key) > 14 else "'***'"
