"""Anthropic ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (what Claude Code calls).

Conversion: ``system`` (a string or text blocks) is the system message; a ``system`` role message in
``messages`` (Claude Code sends these) becomes a user turn (templates allow a system turn only first),
or the system message when there is none before it; user ``tool_result`` blocks
become tool messages (in order, text blocks around them become user turns); assistant ``thinking``
blocks are the turn's reasoning, ``text`` its content, ``tool_use`` its tool calls (input re-serialised
as JSON; matched to our calls by id). ``cache_control``, ``metadata``, ``thinking`` settings,
``context_management``, ``output_config``, ``service_tier`` and other unknown fields are accepted and
ignored; ``?beta=true`` too. An integer ``seed`` (not part of Anthropic's API) seeds sampling. Server tools (a tool with a ``type`` other than ``custom``, e.g. web search)
are not offered to the policy. Images/documents are refused (the served model reads text), as are
``top_k`` (the engine samples without it) and an assistant prefill as the last message.

Usage: ``input_tokens`` counts prompt tokens not served from the engine's KV cache and
``cache_read_input_tokens`` those that were, so their sum is the prompt length (what Claude Code adds up
to size its context). Streaming sends ``message_start`` (full usage object) before generation, ``ping``
while the model runs, then per block ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``thinking_delta`` + ``signature_delta``, ``input_json_delta``) / ``content_block_stop``, then
``message_delta`` (stop_reason, usage) and ``message_stop``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

from gyre.chat import Conversation, Message, Tool, ToolCall
from gyre.proxy.errors import ProxyError, bad_request
from gyre.proxy.executions import OpenExecution
from gyre.proxy.service import CallResult, GenOptions, PreparedCall, Proxy
from gyre.proxy.sse import chunks, named_event, run_streaming
from gyre.proxy.validate import (
    as_dict,
    get_bool,
    get_float,
    get_int,
    get_list,
    get_str,
    make_tool,
    text_of,
    type_name,
    unique_tools,
)

STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "stop_sequence": "stop_sequence"}
SIGNATURE = "gyre-local"  # thinking blocks need a signature field; ours carries no meaning


def parse_system(raw: Any) -> str:
    if raw is None:
        return ""
    return text_of(raw, "system")


def parse_tools(body: dict[str, Any]) -> tuple[Tool, ...]:
    tools = []
    for index, raw in enumerate(get_list(body, "tools")):
        where = f"tools[{index}]"
        raw = as_dict(raw, where)
        if raw.get("type") not in (None, "custom"):
            continue  # a server tool (web search, code execution, ...): not offered to the policy
        if "input_schema" not in raw:
            raise bad_request(f"{where}.input_schema: field required", f"{where}.input_schema")
        tools.append(make_tool(raw.get("name"), raw.get("description"), raw.get("input_schema"), where))
    return unique_tools(tools, "tools")


def tool_choice_allows_calls(raw: Any, tools: tuple[Tool, ...]) -> bool:
    if raw is None:
        return True
    choice = as_dict(raw, "tool_choice")
    kind = choice.get("type")
    if kind == "none":
        return False
    if kind in ("auto", "any"):
        return True
    if kind == "tool":
        name = choice.get("name")
        if not any(tool.name == name for tool in tools):
            raise bad_request(f"tool_choice.name: {name!r:.60} is not among the tools", "tool_choice.name")
        return True
    raise bad_request(f"tool_choice.type: expected 'auto', 'any', 'tool' or 'none', got {kind!r:.40}", "tool_choice.type")


def _tool_result_text(block: dict[str, Any], where: str) -> str:
    content = block.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    return text_of(content, f"{where}.content")


def parse_messages(raw_messages: list[Any], system: str) -> tuple[Message, ...]:
    messages: list[Message] = [Message("system", system)] if system else []
    for index, raw in enumerate(raw_messages):
        where = f"messages[{index}]"
        raw = as_dict(raw, where)
        role = raw.get("role")
        content = raw.get("content")
        if role == "system":  # Claude Code sends some context as system messages mid-conversation
            text = text_of(content, f"{where}.content")
            messages.append(Message("system", text) if not messages else Message("user", text))
            continue
        if role not in ("user", "assistant"):
            raise bad_request(f"{where}.role: expected 'user', 'assistant' or 'system', got {role!r:.40}", f"{where}.role")
        if isinstance(content, str):
            messages.append(Message(role, content))
            continue
        if not isinstance(content, list):
            raise bad_request(f"{where}.content: expected a string or an array of blocks, got {type_name(content)}", f"{where}.content")
        if role == "user":
            messages.extend(_user_blocks(content, where))
        else:
            messages.append(_assistant_blocks(content, where))
    return tuple(messages)


def _user_blocks(blocks: list[Any], where: str) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for index, block in enumerate(blocks):
        at = f"{where}.content[{index}]"
        block = as_dict(block, at)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{at}.text: expected a string, got {type_name(text)}", f"{at}.text")
            texts.append(text)
        elif kind == "tool_result":
            if texts:
                out.append(Message("user", "\n".join(texts)))
                texts = []
            tool_use_id = get_str(block, "tool_use_id", path=f"{at}.", required=True)
            out.append(Message("tool", _tool_result_text(block, at), tool_call_id=tool_use_id or ""))
        else:
            raise bad_request(
                f"{at}.type: {kind!r:.40} blocks are not supported in user turns (the served model reads text and tool results)",
                f"{at}.type",
            )
    if texts or not out:
        out.append(Message("user", "\n".join(texts)))
    return out


def _assistant_blocks(blocks: list[Any], where: str) -> Message:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(blocks):
        at = f"{where}.content[{index}]"
        block = as_dict(block, at)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{at}.text: expected a string, got {type_name(text)}", f"{at}.text")
            texts.append(text)
        elif kind == "thinking":
            thinking = block.get("thinking")
            if not isinstance(thinking, str):
                raise bad_request(f"{at}.thinking: expected a string, got {type_name(thinking)}", f"{at}.thinking")
            reasoning.append(thinking)
        elif kind == "redacted_thinking":
            continue  # opaque and never produced by this proxy
        elif kind == "tool_use":
            call_id = get_str(block, "id", path=f"{at}.", required=True)
            name = get_str(block, "name", path=f"{at}.", required=True)
            arguments = block.get("input", {})
            if not isinstance(arguments, dict):
                raise bad_request(f"{at}.input: expected an object, got {type_name(arguments)}", f"{at}.input")
            calls.append(ToolCall(call_id or "", name or "", json.dumps(arguments, ensure_ascii=False)))
        else:
            raise bad_request(f"{at}.type: {kind!r:.40} blocks are not supported in assistant turns", f"{at}.type")
    return Message("assistant", "".join(texts), "\n".join(reasoning), tuple(calls))


def parse_conversation(body: dict[str, Any]) -> Conversation:
    tools = parse_tools(body)
    messages = parse_messages(get_list(body, "messages", required=True), parse_system(body.get("system")))
    if not any(m.role != "system" for m in messages):
        raise bad_request("messages: at least one message is required", "messages")
    try:
        return Conversation(messages, tools)
    except ValueError as error:
        raise bad_request(f"messages: {error}", "messages") from error


class Messages:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def prepare(self, execution: OpenExecution, body: dict[str, Any], agent: str | None) -> tuple[PreparedCall, dict[str, Any]]:
        if body.get("top_k") is not None:
            raise bad_request("top_k: not supported (the engine samples with temperature and top_p only)", "top_k")
        stop = get_list(body, "stop_sequences")
        if not all(isinstance(s, str) and s for s in stop):
            raise bad_request("stop_sequences: expected an array of non-empty strings", "stop_sequences")
        options = GenOptions(
            api="anthropic.messages",
            model=get_str(body, "model", required=True) or "",
            max_tokens=get_int(body, "max_tokens", minimum=1, required=True),
            temperature=get_float(body, "temperature", minimum=0.0, maximum=1.0),
            top_p=get_float(body, "top_p", minimum=0.0, maximum=1.0),
            stop=tuple(stop),
            seed=get_int(body, "seed"),  # a Gyre extension (not in Anthropic's API) for reproducible runs
            tool_id_prefix="toolu_",
        )
        conversation = parse_conversation(body)
        if conversation.messages[-1].role == "assistant":
            raise bad_request("messages: the last message is an assistant prefill, which this proxy does not support", "messages")
        options.parse_tools = tool_choice_allows_calls(body.get("tool_choice"), conversation.tools)
        flags = {"stream": get_bool(body, "stream"), "message_id": f"msg_{secrets.token_hex(12)}"}
        return self.proxy.prepare_chat(execution, conversation, options, agent), flags

    def count_tokens(self, execution: OpenExecution, body: dict[str, Any]) -> dict[str, Any]:
        get_str(body, "model", required=True)
        self.proxy.charge_count_tokens(execution)
        return {"input_tokens": self.proxy.count_tokens(parse_conversation(body))}

    # ------------------------------------------------------------------ shapes

    @staticmethod
    def blocks(result: CallResult) -> list[dict[str, Any]]:
        assistant = result.assistant
        blocks: list[dict[str, Any]] = []
        if assistant.reasoning:
            blocks.append({"type": "thinking", "thinking": assistant.reasoning, "signature": SIGNATURE})
        if assistant.content or not assistant.tool_calls:
            blocks.append({"type": "text", "text": assistant.content})
        for call in assistant.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments)})
        return blocks

    @staticmethod
    def usage(prompt_tokens: int, cached: int, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": prompt_tokens - cached,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "service_tier": "standard",
        }

    def response(self, call: PreparedCall, result: CallResult, flags: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": flags["message_id"],
            "type": "message",
            "role": "assistant",
            "model": call.options.model,
            "content": self.blocks(result),
            "stop_reason": STOP_REASON[result.finish],
            "stop_sequence": result.stop_sequence,
            "usage": self.usage(result.prompt_tokens, result.cached_tokens, result.completion_tokens),
        }

    async def stream(self, call: PreparedCall, flags: dict[str, Any]) -> AsyncIterator[bytes]:
        start = {
            "id": flags["message_id"],
            "type": "message",
            "role": "assistant",
            "model": call.options.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage(call.prompt_tokens, 0, 1),
        }
        yield named_event("message_start", {"type": "message_start", "message": start})
        ping = named_event("ping", {"type": "ping"})
        yield ping
        async for item in run_streaming(self.proxy, call, ping):
            if isinstance(item, bytes):
                yield item
            elif isinstance(item, ProxyError):
                yield named_event("error", item.body("anthropic"))
            else:
                for event in self.result_events(item):
                    yield event

    def result_events(self, result: CallResult) -> Iterator[bytes]:
        """The events after ``message_start``: each content block, ``message_delta``, ``message_stop``."""
        size = self.proxy.config.stream_chunk_chars
        for index, block in enumerate(self.blocks(result)):
            kind = block["type"]
            if kind == "text":
                yield named_event("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
                for piece in chunks(block["text"], size):
                    yield named_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})
            elif kind == "thinking":
                yield named_event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                )
                for piece in chunks(block["thinking"], size):
                    yield named_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}})
                yield named_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": SIGNATURE}})
            else:
                started = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                yield named_event("content_block_start", {"type": "content_block_start", "index": index, "content_block": started})
                for piece in chunks(json.dumps(block["input"], ensure_ascii=False), size):
                    yield named_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})
            yield named_event("content_block_stop", {"type": "content_block_stop", "index": index})
        delta_usage = self.usage(result.prompt_tokens, result.cached_tokens, result.completion_tokens)
        delta_usage.pop("service_tier")
        yield named_event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": STOP_REASON[result.finish], "stop_sequence": result.stop_sequence}, "usage": delta_usage},
        )
        yield named_event("message_stop", {"type": "message_stop"})
