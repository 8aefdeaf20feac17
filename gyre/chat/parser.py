"""Splitting generated text into reasoning, content and tool calls (Qwen/Hermes format).

Format: an optional ``<think>...</think>`` block first, then text, with tool calls written as
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. A block that is not a valid call
(bad JSON, no name, arguments not an object, no closing tag) stays in the content verbatim: the harness
sees what the model wrote, and nothing the policy produced is ever dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ParsedCall:
    """A well-formed tool call: its function name and JSON-object arguments (as text)."""

    name: str
    arguments: str


@dataclass
class ParsedOutput:
    content: str
    reasoning: str = ""
    tool_calls: list[ParsedCall] = field(default_factory=list)


def parse_tool_call(body: str) -> ParsedCall | None:
    """The call in one ``<tool_call>`` block body, or ``None`` if it is malformed."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ParsedCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def split_reasoning(text: str, *, think_opened: bool = False) -> tuple[str, str]:
    """(reasoning, rest). A closed think block at the start counts; an unclosed one stays content. With
    ``think_opened`` (the generation prompt itself ended with ``<think>``, as Qwen3-style templates do)
    the model writes only the block's end, so the text up to ``</think>`` is the reasoning."""
    if think_opened:
        end = text.find(THINK_CLOSE)
        if end >= 0:
            return text[:end].strip("\n"), text[end + len(THINK_CLOSE) :].lstrip("\n")
        return "", text
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return "", text
    end = stripped.find(THINK_CLOSE)
    if end < 0:
        return "", text
    reasoning = stripped[len(THINK_OPEN) : end].strip("\n")
    return reasoning, stripped[end + len(THINK_CLOSE) :].lstrip("\n")


def parse_output(text: str, *, parse_tools: bool = True, think_opened: bool = False) -> ParsedOutput:
    """Split ``text`` (a generated turn without its end-of-turn token).

    With ``parse_tools=False`` (``tool_choice: none``, or no tools offered) tool-call blocks stay text;
    ``think_opened`` says the prompt ended inside an opened think block (see ``split_reasoning``).
    With tool calls present the content is the remaining text stripped of the whitespace that joined it to
    the calls; without any it is returned exactly.
    """
    reasoning, rest = split_reasoning(text, think_opened=think_opened)
    if not parse_tools or "<tool_call>" not in rest:
        return ParsedOutput(content=rest, reasoning=reasoning)
    calls: list[ParsedCall] = []
    kept: list[str] = []
    cursor = 0
    for match in TOOL_CALL_RE.finditer(rest):
        call = parse_tool_call(match.group(1).strip())
        if call is None:
            continue  # malformed: left in place, so it is copied into the content below
        kept.append(rest[cursor : match.start()])
        cursor = match.end()
        calls.append(call)
    kept.append(rest[cursor:])
    if not calls:
        return ParsedOutput(content=rest, reasoning=reasoning)
    content = "\n".join(part.strip() for part in kept if part.strip())
    return ParsedOutput(content=content, reasoning=reasoning, tool_calls=calls)
