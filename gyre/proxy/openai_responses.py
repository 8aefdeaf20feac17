"""OpenAI ``POST /v1/responses`` (the Responses API current Codex CLI speaks), stateless.

Input items become canonical messages: ``instructions`` and leading system/developer items form the
system message; consecutive ``reasoning``, assistant ``message`` and ``function_call`` items form one
assistant turn (reasoning, text, tool calls in that order, which is how this API returns a turn);
``function_call_output`` items become tool results. ``previous_response_id`` is refused with a 400: the
proxy keeps no server-side conversation state, so clients must send the full input (Codex does, with
``store: false``). Non-function tools (web search, custom/freeform tools, ...) are ignored, so the model
is only offered the function tools.

Streaming emits the standard event sequence: ``response.created``, ``response.in_progress``, then per
output item ``response.output_item.added``, its content events (``response.content_part.added``,
``response.output_text.delta``/``.done``, ``response.content_part.done``, or
``response.function_call_arguments.delta``/``.done``, or ``response.reasoning_text.delta``/``.done``),
``response.output_item.done``, and finally ``response.completed`` (``response.incomplete`` when cut by
``max_output_tokens``) carrying usage; every event has a ``sequence_number``.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from gyre.chat import Conversation, Message, Tool, ToolCall
from gyre.proxy.errors import ProxyError, bad_request
from gyre.proxy.executions import OpenExecution
from gyre.proxy.openai_chat import refuse_unsupported, tool_choice_allows_calls
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

TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def parse_tools(body: dict[str, Any]) -> tuple[Tool, ...]:
    tools = []
    for index, raw in enumerate(get_list(body, "tools")):
        where = f"tools[{index}]"
        raw = as_dict(raw, where)
        if raw.get("type") != "function":
            continue  # built-in / custom tools: not offered to the policy (see the module docstring)
        tools.append(make_tool(raw.get("name"), raw.get("description"), raw.get("parameters"), where))
    return unique_tools(tools, "tools")


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    parts = item.get("content") or item.get("summary") or []
    if not isinstance(parts, list):
        raise bad_request(f"{where}.content: expected an array, got {type_name(parts)}", f"{where}.content")
    texts = []
    for index, part in enumerate(parts):
        part = as_dict(part, f"{where}.content[{index}]")
        text = part.get("text")
        if not isinstance(text, str):
            raise bad_request(f"{where}.content[{index}].text: expected a string", f"{where}.content[{index}].text")
        texts.append(text)
    return "\n".join(texts)


def parse_input(body: dict[str, Any]) -> tuple[Message, ...]:
    system: list[str] = []
    instructions = get_str(body, "instructions")
    if instructions:
        system.append(instructions)
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        raw_input = [{"role": "user", "content": raw_input}]
    if not isinstance(raw_input, list):
        raise bad_request(f"input: expected a string or an array of items, got {type_name(raw_input)}", "input")
    messages: list[Message] = []
    turn: dict[str, Any] | None = None  # the assistant turn being assembled

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            messages.append(Message("assistant", "\n".join(turn["text"]), "\n".join(turn["reasoning"]), tuple(turn["calls"])))
            turn = None

    def assistant() -> dict[str, Any]:
        nonlocal turn
        if turn is None:
            turn = {"text": [], "reasoning": [], "calls": []}
        return turn

    for index, item in enumerate(raw_input):
        where = f"input[{index}]"
        item = as_dict(item, where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = text_of(item.get("content"), f"{where}.content", allowed=TEXT_PARTS)
            if role == "assistant":
                current = assistant()
                if current["calls"]:  # text after calls starts a new turn
                    flush()
                    current = assistant()
                current["text"].append(text)
                continue
            flush()
            if role in ("system", "developer"):
                (messages.append(Message("user", text)) if messages else system.append(text))
            elif role == "user":
                messages.append(Message("user", text))
            else:
                raise bad_request(f"{where}.role: {role!r:.40} is not one of 'system', 'developer', 'user', 'assistant'", f"{where}.role")
        elif kind == "reasoning":
            current = assistant()
            if current["text"] or current["calls"]:
                flush()
                current = assistant()
            current["reasoning"].append(_reasoning_text(item, where))
        elif kind == "function_call":
            call_id = get_str(item, "call_id", path=f"{where}.", required=True)
            name = get_str(item, "name", path=f"{where}.", required=True)
            arguments = get_str(item, "arguments", path=f"{where}.", default="{}")
            assistant()["calls"].append(ToolCall(call_id or "", name or "", arguments or "{}"))
        elif kind == "function_call_output":
            flush()
            call_id = get_str(item, "call_id", path=f"{where}.", required=True)
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output, f"{where}.output", allowed=TEXT_PARTS)
            messages.append(Message("tool", text, tool_call_id=call_id or ""))
        else:
            raise bad_request(f"{where}.type: input items of type {kind!r:.40} are not supported", f"{where}.type")
    flush()
    if system:
        messages.insert(0, Message("system", "\n\n".join(system)))
    if not messages:
        raise bad_request("input: at least one input item is required", "input")
    return tuple(messages)


class Responses:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def prepare(self, execution: OpenExecution, body: dict[str, Any], agent: str | None) -> tuple[PreparedCall, dict[str, Any]]:
        refuse_unsupported(body)
        if body.get("previous_response_id"):
            raise bad_request(
                "previous_response_id: not supported; this proxy is stateless, send the full input (store: false)",
                "previous_response_id",
            )
        model = get_str(body, "model", required=True) or ""
        options = GenOptions(
            api="openai.responses",
            model=model,
            max_tokens=get_int(body, "max_output_tokens", minimum=1),
            temperature=get_float(body, "temperature", minimum=0.0, maximum=2.0),
            top_p=get_float(body, "top_p", minimum=0.0, maximum=1.0),
            seed=get_int(body, "seed"),
            max_tokens_param="max_output_tokens",
        )
        tools = parse_tools(body)
        options.parse_tools = tool_choice_allows_calls(body.get("tool_choice"), tools)
        try:
            conversation = Conversation(parse_input(body), tools)
        except ValueError as error:
            raise bad_request(f"input: {error}", "input") from error
        echo = {
            "instructions": body.get("instructions"),
            "tools": [t for t in get_list(body, "tools") if isinstance(t, dict) and t.get("type") == "function"],
            "tool_choice": body.get("tool_choice") or "auto",
            "temperature": options.temperature if options.temperature is not None else self.proxy.config.default_temperature,
            "top_p": options.top_p if options.top_p is not None else 1.0,
            "max_output_tokens": options.max_tokens,
            "parallel_tool_calls": get_bool(body, "parallel_tool_calls", True),
            "metadata": body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
            "store": get_bool(body, "store", False),
            "reasoning": body.get("reasoning") if isinstance(body.get("reasoning"), dict) else None,
        }
        flags = {"stream": get_bool(body, "stream"), "echo": echo, "response_id": f"resp_{secrets.token_hex(16)}"}
        return self.proxy.prepare_chat(execution, conversation, options, agent), flags

    # ------------------------------------------------------------------ shapes

    def _envelope(self, call: PreparedCall, flags: dict[str, Any], status: str, output: list[dict[str, Any]], result: CallResult | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": flags["response_id"],
            "object": "response",
            "created_at": flags.setdefault("created_at", int(time.time())),
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": call.options.model,
            "output": output,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "usage": None,
            "user": None,
            **flags["echo"],
        }
        if result is not None:
            if result.finish == "length":
                body["incomplete_details"] = {"reason": "max_output_tokens"}
            body["usage"] = {
                "input_tokens": result.prompt_tokens,
                "input_tokens_details": {"cached_tokens": result.cached_tokens, "cache_write_tokens": 0},
                "output_tokens": result.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": result.prompt_tokens + result.completion_tokens,
            }
        return body

    def output_items(self, result: CallResult) -> list[dict[str, Any]]:
        assistant = result.assistant
        items: list[dict[str, Any]] = []
        if assistant.reasoning:
            items.append(
                {
                    "id": f"rs_{secrets.token_hex(12)}",
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": assistant.reasoning}],
                    "status": "completed",
                }
            )
        if assistant.content or not assistant.tool_calls:
            items.append(
                {
                    "id": f"msg_{secrets.token_hex(12)}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": assistant.content, "annotations": [], "logprobs": []}],
                }
            )
        for tool_call in assistant.tool_calls:
            items.append(
                {
                    "id": f"fc_{secrets.token_hex(12)}",
                    "type": "function_call",
                    "call_id": tool_call.id,
                    "name": tool_call.name,
                    "arguments": tool_call.arguments,
                    "status": "completed",
                }
            )
        return items

    def _status(self, result: CallResult) -> str:
        return "incomplete" if result.finish == "length" else "completed"

    def response(self, call: PreparedCall, result: CallResult, flags: dict[str, Any]) -> dict[str, Any]:
        return self._envelope(call, flags, self._status(result), self.output_items(result), result)

    def _event(self, flags: dict[str, Any], event_type: str, /, **data: Any) -> bytes:
        """A numbered event (positional-only type: ``name`` is also a payload field of some events)."""
        sequence = flags.get("sequence", 0)
        flags["sequence"] = sequence + 1
        return named_event(event_type, {"type": event_type, "sequence_number": sequence, **data})

    async def stream(self, call: PreparedCall, flags: dict[str, Any]) -> AsyncIterator[bytes]:
        yield self._event(flags, "response.created", response=self._envelope(call, flags, "in_progress", [], None))
        yield self._event(flags, "response.in_progress", response=self._envelope(call, flags, "in_progress", [], None))
        async for item in run_streaming(self.proxy, call, b": keep-alive\n\n"):
            if isinstance(item, bytes):
                yield item
            elif isinstance(item, ProxyError):
                body = item.body("openai")["error"]
                yield self._event(flags, "error", code=body["code"], message=body["message"], param=body["param"])
                failed = self._envelope(call, flags, "failed", [], None)
                failed["error"] = {"code": body["code"] or body["type"], "message": body["message"]}
                yield self._event(flags, "response.failed", response=failed)
            else:
                for event in self.result_events(call, item, flags):
                    yield event

    def result_events(self, call: PreparedCall, result: CallResult, flags: dict[str, Any]) -> Iterator[bytes]:
        """Events after ``response.in_progress``: each output item with its content events, then the end."""
        size = self.proxy.config.stream_chunk_chars
        event = functools.partial(self._event, flags)
        items = self.output_items(result)
        for index, done_item in enumerate(items):
            kind = done_item["type"]
            started = {**done_item, "status": "in_progress"}
            if kind == "message":
                started["content"] = []
            elif kind == "function_call":
                started["arguments"] = ""
            elif kind == "reasoning":
                started["content"] = []
            yield event("response.output_item.added", output_index=index, item=started)
            item_id = done_item["id"]
            if kind == "message":
                text = done_item["content"][0]["text"]
                empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                yield event("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=empty_part)
                for piece in chunks(text, size):
                    yield event("response.output_text.delta", item_id=item_id, output_index=index, content_index=0, delta=piece, logprobs=[])
                yield event("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text, logprobs=[])
                yield event("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=done_item["content"][0])
            elif kind == "function_call":
                for piece in chunks(done_item["arguments"], size):
                    yield event("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
                yield event("response.function_call_arguments.done", item_id=item_id, output_index=index, name=done_item["name"], arguments=done_item["arguments"])
            elif kind == "reasoning":
                text = done_item["content"][0]["text"]
                for piece in chunks(text, size):
                    yield event("response.reasoning_text.delta", item_id=item_id, output_index=index, content_index=0, delta=piece)
                yield event("response.reasoning_text.done", item_id=item_id, output_index=index, content_index=0, text=text)
            yield event("response.output_item.done", output_index=index, item=done_item)
        status = self._status(result)
        final = "response.incomplete" if status == "incomplete" else "response.completed"
        yield event(final, response=self._envelope(call, flags, status, items, result))
