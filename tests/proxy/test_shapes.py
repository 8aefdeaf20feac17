"""Response and stream shapes for turns with reasoning and tool calls, checked with the SDKs' own types.

The tiny model's random weights never write a well-formed tool call, so these tests build the parsed turn
(``CallResult``) directly and run it through each API's shaping code: every event must validate against
the official SDK's pydantic types, and the SDK's own stream accumulators must rebuild the turn
(tool-call arguments from ``input_json_delta`` / argument deltas included).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import TypeAdapter

from gyre.chat import Message, ToolCall
from gyre.protocol import CallRecord
from gyre.proxy.anthropic_messages import Messages
from gyre.proxy.openai_chat import ChatCompletions
from gyre.proxy.openai_responses import Responses
from gyre.proxy.service import CallResult, GenOptions


def make_result(tool_prefix: str) -> tuple[Any, CallResult]:
    calls = (
        ToolCall(f"{tool_prefix}a1", "bash", json.dumps({"command": "ls -la /tmp && echo 'done with a long line'"})),
        ToolCall(f"{tool_prefix}b2", "read", json.dumps({"path": "src/main.py", "lines": [1, 40]})),
    )
    assistant = Message("assistant", "I will look at the files first, then read main.", "The user wants a fix.", calls)
    record = CallRecord("e", "e:00001-abcdef", "main", [1, 2, 3], [7, 8, 9, 2], [-0.5, -0.25, -1.0, -0.1], 0)
    result = CallResult(record.call_id, record, "raw", assistant, "tool_calls", None, 3, 4, 1)
    call = SimpleNamespace(call_id=record.call_id, options=GenOptions(api="x", model="served"), prompt_tokens=3)
    return call, result


def parse_sse(raw: bytes) -> list[tuple[str | None, Any]]:
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = line[len("data: ") :]
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


@pytest.fixture
def proxy_stub():
    from gyre.chat import ChatTemplate
    from gyre.models import load_tokenizer

    return SimpleNamespace(config=SimpleNamespace(stream_chunk_chars=7), template=ChatTemplate(load_tokenizer("tiny")))


def test_anthropic_stream_and_message(proxy_stub) -> None:
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import RawMessageStreamEvent

    api = Messages(proxy_stub)
    call, result = make_result("toolu_")
    flags = {"message_id": "msg_1"}
    body = api.response(call, result, flags)
    message = AnthropicMessage.model_validate(body)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.stop_reason == "tool_use" and message.content[2].input["command"].startswith("ls -la")

    start = {"type": "message_start", "message": {**body, "content": [], "stop_reason": None, "usage": api.usage(3, 0, 1)}}
    raw = b"event: message_start\ndata: " + json.dumps(start).encode() + b"\n\n" + b"".join(api.result_events(result))
    adapter = TypeAdapter(RawMessageStreamEvent)
    snapshot, buffers = None, {}
    for name, data in parse_sse(raw):
        event = adapter.validate_python(data)
        assert event.type == name
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    assert snapshot.content[0].thinking == "The user wants a fix." and snapshot.content[0].signature
    assert snapshot.content[1].text == result.assistant.content
    assert [(b.id, b.input) for b in snapshot.content[2:]] == [(c.id, json.loads(c.arguments)) for c in result.assistant.tool_calls]
    assert snapshot.stop_reason == "tool_use" and snapshot.usage.output_tokens == 4


def test_openai_chat_stream_and_message(proxy_stub) -> None:
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    api = ChatCompletions(proxy_stub)
    call, result = make_result("call_")
    flags = {"stream": True, "include_usage": True, "logprobs": True}
    completion = ChatCompletion.model_validate(api.response(call, result, flags))
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [(t.id, t.function.name) for t in message.tool_calls] == [("call_a1", "bash"), ("call_b2", "read")]
    assert [lp.logprob for lp in completion.choices[0].logprobs.content] == result.record.response_logprobs

    state = ChatCompletionStreamState()
    events = parse_sse(b"".join(api.result_events(call, result, flags)))
    assert events[-1] == (None, "[DONE]")
    for _, data in events[:-1]:
        state.handle_chunk(ChatCompletionChunk.model_validate(data))
    final = state.get_final_completion()
    rebuilt = final.choices[0].message
    assert rebuilt.content == result.assistant.content
    assert [(t.id, t.function.arguments) for t in rebuilt.tool_calls] == [(c.id, c.arguments) for c in result.assistant.tool_calls]
    assert final.usage.completion_tokens == 4


def test_openai_responses_stream_and_object(proxy_stub) -> None:
    from openai.lib.streaming.responses import ResponseStreamState
    from openai.types.responses import Response, ResponseStreamEvent

    api = Responses(proxy_stub)
    call, result = make_result("call_")
    echo = {"instructions": None, "tools": [], "tool_choice": "auto", "temperature": 1.0, "top_p": 1.0,
            "max_output_tokens": None, "parallel_tool_calls": True, "metadata": {}, "store": False, "reasoning": None}
    flags = {"stream": True, "echo": echo, "response_id": "resp_1"}
    response = Response.model_validate(api.response(call, result, flags))
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call", "function_call"]
    assert response.output_text == result.assistant.content

    from openai import omit

    state = ResponseStreamState(input_tools=omit, text_format=omit)
    adapter = TypeAdapter(ResponseStreamEvent)
    created = api._event(flags, "response.created", response=api._envelope(call, flags, "in_progress", [], None))
    raw = created + b"".join(api.result_events(call, result, flags))
    events = parse_sse(raw)
    for name, data in events:
        event = adapter.validate_python(data)
        assert event.type == name
        state.handle_event(event)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    final = state._completed_response
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.arguments) for c in calls] == [(c.id, c.arguments) for c in result.assistant.tool_calls]
    assert final.usage.output_tokens == 4
