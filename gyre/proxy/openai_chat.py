"""OpenAI ``POST /v1/chat/completions`` (and the OpenAI request pieces the other OpenAI routes share).

Conversion to the canonical conversation:
- Leading ``system``/``developer`` messages become one system message (joined by blank lines); a later
  one becomes a user turn (chat templates allow a system message only first).
- ``tool`` messages keep their ``tool_call_id``; assistant ``tool_calls`` keep id, name and argument text.
- A non-standard assistant ``reasoning_content`` (or ``reasoning``) is the turn's reasoning; clients that
  drop it make the next call a new branch (see ``gyre.chat.history``).
- Any model name is accepted and served by the policy (harnesses send their own names); the response
  echoes the requested name.
- Sampling knobs the policy cannot honour exactly (penalties, logit_bias, n > 1, top_logprobs) are
  refused with a 400 rather than ignored: RL needs the behaviour policy to be what actually sampled.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from gyre.chat import Conversation, Message, Tool, ToolCall
from gyre.proxy.errors import ProxyError, bad_request
from gyre.proxy.executions import OpenExecution
from gyre.proxy.service import CallResult, GenOptions, PreparedCall, Proxy
from gyre.proxy.sse import chunks, data_event, run_streaming
from gyre.proxy.validate import (
    as_dict,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_stop,
    get_str,
    make_tool,
    text_of,
    type_name,
    unique_tools,
)

OPENAI_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "stop_sequence": "stop"}


def refuse_unsupported(body: dict[str, Any]) -> None:
    """400 for sampling options that would make the sampled policy differ from the recorded one."""
    for key in ("presence_penalty", "frequency_penalty"):
        value = get_float(body, key)
        if value not in (None, 0.0):
            raise bad_request(f"{key}: only 0 is supported (penalties would change the behaviour policy)", key)
    if body.get("logit_bias"):
        raise bad_request("logit_bias: not supported (it would change the behaviour policy)", "logit_bias")
    n = get_int(body, "n", minimum=1)
    if n not in (None, 1):
        raise bad_request(f"n: only 1 is supported, got {n}; send separate requests", "n")


def sampling_options(body: dict[str, Any], api: str, *, max_tokens_keys: tuple[str, ...]) -> GenOptions:
    model = get_str(body, "model", required=True)
    max_tokens = None
    param = max_tokens_keys[0]
    for key in max_tokens_keys:
        value = get_int(body, key, minimum=1)
        if value is not None:
            max_tokens, param = value, key
    return GenOptions(
        api=api,
        model=model or "",
        max_tokens=max_tokens,
        temperature=get_float(body, "temperature", minimum=0.0, maximum=2.0),
        top_p=get_float(body, "top_p", minimum=0.0, maximum=1.0),
        seed=get_int(body, "seed"),
        stop=get_stop(body, "stop"),
        max_tokens_param=param,
    )


def parse_tools(body: dict[str, Any]) -> tuple[Tool, ...]:
    tools = []
    for index, raw in enumerate(get_list(body, "tools")):
        where = f"tools[{index}]"
        raw = as_dict(raw, where)
        if raw.get("type", "function") != "function":
            raise bad_request(f"{where}.type: only 'function' tools are supported, got {raw.get('type')!r:.40}", f"{where}.type")
        function = get_dict(raw, "function", path=f"{where}.")
        if function is None:
            raise bad_request(f"{where}.function: field required", f"{where}.function")
        tools.append(make_tool(function.get("name"), function.get("description"), function.get("parameters"), f"{where}.function"))
    return unique_tools(tools, "tools")


def tool_choice_allows_calls(choice: Any, tools: tuple[Tool, ...], param: str = "tool_choice") -> bool:
    """Validate ``tool_choice``; False for "none" (tool-call blocks then stay text). "required" and named
    choices are accepted but not enforced by constrained decoding."""
    if choice is None or choice in ("auto", "required"):
        return True
    if choice == "none":
        return False
    if isinstance(choice, dict):
        function = choice.get("function") if isinstance(choice.get("function"), dict) else choice
        name = function.get("name")
        if choice.get("type") in ("function", "allowed_tools") and (name is None or any(t.name == name for t in tools)):
            return True
        raise bad_request(f"{param}: names function {name!r:.60}, which is not among the tools", param)
    raise bad_request(f"{param}: expected 'none', 'auto', 'required' or a function choice, got {choice!r:.60}", param)


def parse_tool_calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise bad_request(f"{where}: expected an array, got {type_name(raw)}", where)
    calls = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        item = as_dict(item, at)
        function = get_dict(item, "function", path=f"{at}.") or {}
        call_id = get_str(item, "id", path=f"{at}.", required=True)
        name = get_str(function, "name", path=f"{at}.function.", required=True)
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise bad_request(f"{at}.function.arguments: expected a JSON string, got {type_name(arguments)}", f"{at}.function.arguments")
        calls.append(ToolCall(call_id or "", name or "", arguments))
    return tuple(calls)


def parse_messages(raw_messages: list[Any], *, leading_system: list[str] | None = None) -> tuple[Message, ...]:
    """OpenAI chat messages -> canonical messages (see the module docstring for the rules)."""
    system = list(leading_system or [])
    messages: list[Message] = []
    for index, raw in enumerate(raw_messages):
        where = f"messages[{index}]"
        raw = as_dict(raw, where)
        role = raw.get("role")
        if role in ("system", "developer"):
            text = text_of(raw.get("content"), f"{where}.content", allowed=("text", "input_text"))
            if messages:
                messages.append(Message("user", text))
            else:
                system.append(text)
        elif role == "user":
            messages.append(Message("user", text_of(raw.get("content"), f"{where}.content", allowed=("text", "input_text"))))
        elif role == "assistant":
            reasoning = raw.get("reasoning_content", raw.get("reasoning")) or ""
            if not isinstance(reasoning, str):
                raise bad_request(f"{where}.reasoning_content: expected a string, got {type_name(reasoning)}", f"{where}.reasoning_content")
            content = text_of(raw.get("content"), f"{where}.content", allowed=("text", "output_text", "refusal"))
            messages.append(Message("assistant", content, reasoning, parse_tool_calls(raw.get("tool_calls"), f"{where}.tool_calls")))
        elif role == "tool":
            call_id = get_str(raw, "tool_call_id", path=f"{where}.", required=True)
            messages.append(Message("tool", text_of(raw.get("content"), f"{where}.content"), tool_call_id=call_id or ""))
        else:
            raise bad_request(
                f"{where}.role: {role!r:.40} is not one of 'system', 'developer', 'user', 'assistant', 'tool'", f"{where}.role"
            )
    if system:
        messages.insert(0, Message("system", "\n\n".join(system)))
    if not messages:
        raise bad_request("messages: at least one message is required", "messages")
    return tuple(messages)


def usage(result: CallResult) -> dict[str, Any]:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.prompt_tokens + result.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
    }


def token_logprobs(proxy: Proxy, result: CallResult) -> list[dict[str, Any]]:
    decode = proxy.template.decode
    out = []
    for token, logprob in zip(result.record.response_ids[: result.completion_tokens], result.record.response_logprobs):
        text = decode([token])
        out.append({"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []})
    return out


class ChatCompletions:
    """Request parsing and response shaping for chat completions."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def prepare(self, execution: OpenExecution, body: dict[str, Any], agent: str | None) -> tuple[PreparedCall, dict[str, Any]]:
        refuse_unsupported(body)
        options = sampling_options(body, "openai.chat", max_tokens_keys=("max_tokens", "max_completion_tokens"))
        tools = parse_tools(body)
        options.parse_tools = tool_choice_allows_calls(body.get("tool_choice"), tools)
        messages = parse_messages(get_list(body, "messages", required=True))
        try:
            conversation = Conversation(messages, tools)
        except ValueError as error:
            raise bad_request(f"messages: {error}", "messages") from error
        logprobs = get_bool(body, "logprobs")
        top = get_int(body, "top_logprobs", minimum=0)
        if top:
            raise bad_request("top_logprobs: only 0 is supported (the engine reports the sampled token's log-prob)", "top_logprobs")
        stream_options = get_dict(body, "stream_options") or {}
        flags = {
            "stream": get_bool(body, "stream"),
            "include_usage": get_bool(stream_options, "include_usage", path="stream_options."),
            "logprobs": logprobs,
        }
        return self.proxy.prepare_chat(execution, conversation, options, agent), flags

    def message(self, result: CallResult) -> dict[str, Any]:
        assistant = result.assistant
        message: dict[str, Any] = {
            "role": "assistant",
            "content": assistant.content if (assistant.content or not assistant.tool_calls) else None,
        }
        if assistant.reasoning:
            message["reasoning_content"] = assistant.reasoning
        if assistant.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in assistant.tool_calls
            ]
        return message

    def response(self, call: PreparedCall, result: CallResult, flags: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{result.call_id.rsplit(':', 1)[-1]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": call.options.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": self.message(result),
                    "logprobs": {"content": token_logprobs(self.proxy, result)} if flags["logprobs"] else None,
                    "finish_reason": OPENAI_FINISH[result.finish],
                }
            ],
            "usage": usage(result),
        }

    def _chunk(self, call: PreparedCall, flags: dict[str, Any], delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{call.call_id.rsplit(':', 1)[-1]}",
            "object": "chat.completion.chunk",
            "created": flags.setdefault("created", int(time.time())),
            "model": call.options.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}],
        }
        if flags["include_usage"]:
            body["usage"] = None
        return data_event(body)

    async def stream(self, call: PreparedCall, flags: dict[str, Any]) -> AsyncIterator[bytes]:
        yield self._chunk(call, flags, {"role": "assistant", "content": ""})
        async for item in run_streaming(self.proxy, call, b": keep-alive\n\n"):
            if isinstance(item, bytes):
                yield item
            elif isinstance(item, ProxyError):
                yield data_event(item.body("openai"))
            else:
                for event in self.result_events(call, item, flags):
                    yield event

    def result_events(self, call: PreparedCall, result: CallResult, flags: dict[str, Any]) -> Iterator[bytes]:
        """The chunks after generation: reasoning, content, tool calls, finish, usage, [DONE]."""
        size = self.proxy.config.stream_chunk_chars
        assistant = result.assistant
        for piece in chunks(assistant.reasoning, size):
            yield self._chunk(call, flags, {"reasoning_content": piece})
        for piece in chunks(assistant.content, size):
            yield self._chunk(call, flags, {"content": piece})
        for index, tool_call in enumerate(assistant.tool_calls):
            opening = {"index": index, "id": tool_call.id, "type": "function", "function": {"name": tool_call.name, "arguments": ""}}
            yield self._chunk(call, flags, {"tool_calls": [opening]})
            for piece in chunks(tool_call.arguments, size):
                yield self._chunk(call, flags, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        extra = {"logprobs": {"content": token_logprobs(self.proxy, result)}} if flags["logprobs"] else {}
        yield self._chunk(call, flags, {}, OPENAI_FINISH[result.finish], **extra)
        if flags["include_usage"]:
            yield data_event(
                {
                    "id": f"chatcmpl-{call.call_id.rsplit(':', 1)[-1]}",
                    "object": "chat.completion.chunk",
                    "created": flags["created"],
                    "model": call.options.model,
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": usage(result),
                }
            )
        yield b"data: [DONE]\n\n"
