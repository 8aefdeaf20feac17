"""The canonical conversation form every API (OpenAI chat/responses, Anthropic messages) is converted to.

One form is needed because token-exact prompt building compares a request's history with earlier calls'
histories: the comparison must not depend on which API (or which SDK re-serialisation) delivered it.
Messages are frozen and hashable so that a conversation prefix can be looked up in a dict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


def parse_json_or_none(text: str) -> Any:
    """``json.loads(text)``, or ``None`` where ``text`` is not JSON (callers then compare raw text)."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class ToolCall:
    """A function call in an assistant turn. ``arguments`` is JSON text, as the model or client wrote it."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> Any:
        return parse_json_or_none(self.arguments)

    def same_call(self, other: ToolCall) -> bool:
        """Same id, name and arguments; arguments compare as JSON values so that re-serialisation
        (key order, spacing) by a client echoing the call back does not count as a change."""
        if self.id != other.id or self.name != other.name:
            return False
        mine, theirs = self.parsed_arguments(), other.parsed_arguments()
        if mine is None or theirs is None:
            return self.arguments == other.arguments
        return mine == theirs

    def to_template(self) -> dict[str, Any]:
        parsed = self.parsed_arguments()
        # A dict renders through the template's tojson, so every client's spelling renders the same way.
        arguments: Any = parsed if isinstance(parsed, dict) else self.arguments
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}


@dataclass(frozen=True)
class Message:
    """One turn. ``reasoning`` is the assistant's thinking (rendered by the template as ``<think>``)."""

    role: Role
    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    # The tool calls as plain strings, so that histories compare in C (``same_messages``).
    calls_key: tuple[str, ...] = field(init=False, repr=False, compare=False, hash=False, default=())

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}; expected one of {ROLES}")
        if self.tool_calls:
            key = tuple(text for call in self.tool_calls for text in (call.id, call.name, call.arguments))
            object.__setattr__(self, "calls_key", key)

    def to_template(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.reasoning:
            data["reasoning_content"] = self.reasoning
        if self.tool_calls:
            data["tool_calls"] = [call.to_template() for call in self.tool_calls]
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.name:
            data["name"] = self.name
        return data


@dataclass(frozen=True)
class Tool:
    """A function the model may call; ``parameters`` is its JSON schema (an object schema)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_template(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def key(self) -> str:
        return json.dumps(self.to_template(), sort_keys=True, ensure_ascii=False)

    def __hash__(self) -> int:  # parameters is a dict: hash its canonical JSON
        return hash(self.key())


def tools_key(tools: tuple[Tool, ...]) -> str:
    """Canonical text of a tool list: two requests offer the same tools iff their keys are equal."""
    return "[" + ",".join(tool.key() for tool in tools) + "]"


@dataclass(frozen=True)
class Conversation:
    """A request's conversation: messages and the tools offered, in the canonical form."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a conversation needs at least one message")
        roles = list(map(_ROLE, self.messages))  # in C: a long history is hundreds of messages
        if "system" in roles[1:]:
            index = roles.index("system", 1)
            raise ValueError(f"messages[{index}]: a system message is only allowed first")


_ROLE = attrgetter("role")
_FIELDS = attrgetter("role", "content", "reasoning", "tool_call_id", "name", "calls_key")


def same_messages(a: tuple[Message, ...], b: tuple[Message, ...]) -> bool:
    """``a == b``, compared field by field in C (a long history is hundreds of messages, and the dataclass
    ``__eq__`` is a Python call per message and per tool call)."""
    return len(a) == len(b) and list(map(_FIELDS, a)) == list(map(_FIELDS, b))
