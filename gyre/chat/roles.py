"""Which agent of an execution made a call: ``main`` or ``sub``, with ``-summary`` for context compaction.

Rules, in order:
1. A header ``x-gyre-agent: main|sub|main-summary|sub-summary`` from the harness decides.
2. Otherwise a conversation is ``main`` if its root (first message: the system prompt when there is one)
   equals the root of the execution's first conversation, else ``sub`` (a sub-agent has its own system
   prompt or its own first instruction). Caveat: a harness whose very first call is a side call (e.g. a
   title or quota probe with its own system prompt) makes that side call the "main" root; such harnesses
   should send the header.
3. ``-summary`` is added when the header says so, or when the last user message matches
   ``summary_pattern`` (a regex; the default matches explicit "summarise the conversation so far"
   instructions such as Claude Code's compaction prompt; ``None`` turns the heuristic off).

Each distinct root also gets a lineage number, used as the engine session key, so that a sub-agent's
calls do not evict the main agent's KV cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gyre.chat.messages import Conversation, Message
from gyre.protocol import AGENT_ROLES

DEFAULT_SUMMARY_PATTERN = (
    r"(?i)(create|write|provide|produce) an? (detailed |concise |brief |short )?summary of (the|this|our) "
    r"conversation|summari[sz]e (the|this|our) conversation"
)
AGENT_HEADER = "x-gyre-agent"


class AgentHeaderError(ValueError):
    """The ``x-gyre-agent`` header holds something other than a role tag."""


@dataclass(frozen=True)
class AgentTag:
    role: str  # one of protocol.AGENT_ROLES
    lineage: int  # index of the conversation root within the execution (0 = the first one seen)


class AgentClassifier:
    """Per-execution role tagging (see the module docstring for the rules)."""

    def __init__(self, summary_pattern: str | None = DEFAULT_SUMMARY_PATTERN) -> None:
        self._summary = re.compile(summary_pattern) if summary_pattern else None
        self._roots: dict[Message, int] = {}

    def classify(self, conversation: Conversation, header: str | None = None) -> AgentTag:
        root = conversation.messages[0]
        lineage = self._roots.setdefault(root, len(self._roots))
        if header is not None and header.strip():
            role = header.strip().lower()
            if role not in AGENT_ROLES:
                raise AgentHeaderError(f"header {AGENT_HEADER}: {header!r} is not one of {AGENT_ROLES}")
            return AgentTag(role, lineage)
        role = "main" if lineage == 0 else "sub"
        if self.is_summary(conversation):
            role += "-summary"
        return AgentTag(role, lineage)

    def is_summary(self, conversation: Conversation) -> bool:
        last = conversation.messages[-1]
        return bool(self._summary and last.role == "user" and self._summary.search(last.content))
