"""The official openai and anthropic SDKs against the live proxy (tiny model on two HFEngine cells)."""

from __future__ import annotations

import itertools
import json

import anthropic
import openai
import pytest

from gyre.protocol import CallRecord

BASH_OPENAI = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}
BASH_ANTHROPIC = {
    "name": "bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    "cache_control": {"type": "ephemeral"},
}


def assert_extends(earlier: CallRecord, later: CallRecord) -> None:
    """``later``'s prompt starts with ``earlier``'s exact prompt + response ids, none re-tokenised."""
    path = earlier.prompt_ids + earlier.response_ids
    assert later.prompt_ids[: len(path)] == path
    assert later.meta["parent_call_id"] == earlier.call_id, later.meta["branch"]
    assert later.meta["reused_tokens"] == len(path)
    assert later.meta["new_tokens"] == len(later.prompt_ids) - len(path)


def text_of_record(proxy, record: CallRecord) -> str:
    ids = record.response_ids[:-1] if record.finish_reason == "stop" else record.response_ids
    return proxy.template.decode(ids)


def test_chat_completion_is_recorded(openai_client, proxy, execution) -> None:
    reply = openai_client.chat.completions.create(
        model="any-model-name", messages=[{"role": "user", "content": "Say hi."}], max_tokens=8, seed=1
    )
    assert reply.model == "any-model-name"
    assert reply.choices[0].finish_reason in ("stop", "length")
    (record,) = proxy.records(execution[0])
    assert record.agent == "main" and record.cell_id.startswith("cell-")
    assert reply.usage.prompt_tokens == len(record.prompt_ids)
    assert reply.usage.completion_tokens == len(record.response_ids) == len(record.response_logprobs)
    assert reply.choices[0].message.content == text_of_record(proxy, record)
    assert all(lp <= 0 for lp in record.response_logprobs)
    assert record.meta["api"] == "openai.chat" and record.meta["parent_call_id"] is None


def test_chat_streaming_matches_record(openai_client, proxy, execution) -> None:
    stream = openai_client.chat.completions.create(
        model="m",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Count."}],
        max_tokens=12,
        seed=2,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = chunks[-1].usage
    (record,) = proxy.records(execution[0])
    assert finish and finish[-1] in ("stop", "length")
    assert text == text_of_record(proxy, record)
    assert usage.completion_tokens == len(record.response_ids)


def test_multi_turn_chat_is_one_growing_path(openai_client, proxy, execution) -> None:
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Start."}]
    for turn in range(3):
        reply = openai_client.chat.completions.create(model="m", messages=messages, max_tokens=10, seed=turn)
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "user", "content": f"Continue {turn}."})
    records = proxy.records(execution[0])
    assert len(records) == 3
    for earlier, later in itertools.pairwise(records):
        assert_extends(earlier, later)
        assert later.meta["rendering"] in ("checked", "incremental")
    # On disk each continuation is its parent call's id plus the new tokens; reading gives full records.
    lines = [json.loads(line) for line in proxy.recorder.path(execution[0]).read_text().splitlines()]
    assert "prompt_ids" in lines[0]
    assert [line["prompt_delta"]["parent"] for line in lines[1:]] == [r.call_id for r in records[:-1]]
    assert [len(line["prompt_delta"]["ids"]) for line in lines[1:]] == [r.meta["new_tokens"] for r in records[1:]]


def test_tool_call_round_trip(openai_client, proxy, execution) -> None:
    """History with a tool call and its result is rendered into the prompt, and the path keeps growing."""
    messages = [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    ]
    first = openai_client.chat.completions.create(model="m", messages=messages, tools=[BASH_OPENAI], tool_choice="auto", max_tokens=8, seed=8)
    (record,) = proxy.records(execution[0])
    prompt = proxy.template.decode(record.prompt_ids)
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>' in prompt
    assert "<tool_response>\na.py\nb.py\n</tool_response>" in prompt
    assert '"name": "bash"' in prompt.split("<tools>\n")[1]  # the tool schema is in the system turn
    messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "And now?"}]
    openai_client.chat.completions.create(model="m", messages=messages, tools=[BASH_OPENAI], max_tokens=8, seed=9)
    first_record, second_record = proxy.records(execution[0])
    assert_extends(first_record, second_record)


def test_logprobs_are_the_recorded_ones(openai_client, proxy, execution) -> None:
    reply = openai_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=6, logprobs=True)
    (record,) = proxy.records(execution[0])
    assert [t.logprob for t in reply.choices[0].logprobs.content] == pytest.approx(record.response_logprobs)


def test_stop_sequence_cuts_text_and_record(openai_client, proxy, execution) -> None:
    ask = {"model": "m", "messages": [{"role": "user", "content": "Talk."}], "max_tokens": 16, "temperature": 1, "seed": 7}
    full = openai_client.chat.completions.create(**ask).choices[0].message.content
    stop = full[len(full) // 2 : len(full) // 2 + 2]
    if len(full) < 6 or not stop.strip():
        pytest.skip(f"seeded output too short to cut: {full!r}")
    cut = openai_client.chat.completions.create(**ask, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == full[: full.index(stop)]
    record = proxy.records(execution[0])[-1]
    assert record.meta["stop_sequence"] == stop
    assert stop in proxy.template.decode(record.response_ids)  # the tokens through the stop string are kept


def test_completions_text_and_token_prompts(openai_client, proxy, execution) -> None:
    text = openai_client.completions.create(model="m", prompt="def main():", max_tokens=5)
    ids = openai_client.completions.create(model="m", prompt=[5, 6, 7, 8], max_tokens=5, logprobs=0)
    first, second = proxy.records(execution[0])
    assert first.prompt_ids == proxy.template.encode("def main():")
    assert second.prompt_ids == [5, 6, 7, 8]
    assert text.choices[0].text == text_of_record(proxy, first)
    assert ids.choices[0].logprobs.token_logprobs == pytest.approx(second.response_logprobs)
    chunks = openai_client.completions.create(model="m", prompt="x", max_tokens=5, stream=True)
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    assert streamed == text_of_record(proxy, proxy.records(execution[0])[-1])


def test_responses_api_with_function_call_history(openai_client, proxy, execution) -> None:
    tools = [{"type": "function", "name": "bash", "description": "Run.", "parameters": BASH_OPENAI["function"]["parameters"]}]
    tools.append({"type": "web_search"})  # a built-in tool: accepted, not offered to the policy
    history = [
        {"role": "developer", "content": "Be careful."},
        {"role": "user", "content": [{"type": "input_text", "text": "What is here?"}]},
        {"type": "function_call", "call_id": "call_9", "name": "bash", "arguments": '{"command": "ls"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "README.md"},
    ]
    reply = openai_client.responses.create(
        model="codex", instructions="You are Codex.", input=history, tools=tools, max_output_tokens=8, store=False, extra_body={"seed": 3}
    )
    assert reply.status in ("completed", "incomplete") and reply.usage.output_tokens >= 1
    (record,) = proxy.records(execution[0])
    prompt = proxy.template.decode(record.prompt_ids)
    assert prompt.startswith("<|im_start|>system\nYou are Codex.\n\nBe careful.")
    assert "<tool_response>\nREADME.md\n</tool_response>" in prompt
    assert reply.output_text == text_of_record(proxy, record)
    # Stream the next turn with the previous output echoed back: the path grows.
    events = list(
        openai_client.responses.create(
            model="codex", instructions="You are Codex.", input=history + [item.model_dump(exclude_none=True) for item in reply.output] + [{"role": "user", "content": "More."}],
            tools=tools, max_output_tokens=8, stream=True, extra_body={"seed": 4},
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_item.added" in kinds and "response.output_item.done" in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.usage.input_tokens == len(proxy.records(execution[0])[1].prompt_ids)
    delta = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert delta == final.output_text
    assert_extends(*proxy.records(execution[0]))


def test_messages_api_with_tools_thinking_and_streaming(anthropic_client, proxy, execution) -> None:
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the bug.", "cache_control": {"type": "ephemeral"}}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "main.py"}, {"type": "text", "text": "Go on."}]},
    ]
    extra = {"context_management": {"edits": []}, "output_config": {"effort": "low"}, "some_future_field": 1, "seed": 5}
    reply = anthropic_client.messages.create(
        model="claude-sonnet-4-5", max_tokens=8, system=system, messages=messages, tools=[BASH_ANTHROPIC],
        thinking={"type": "enabled", "budget_tokens": 1024}, metadata={"user_id": "u"}, extra_body=extra,
        extra_query={"beta": "true"},
    )
    assert reply.stop_reason in ("end_turn", "max_tokens") and reply.model == "claude-sonnet-4-5"
    (record,) = proxy.records(execution[0])
    prompt = proxy.template.decode(record.prompt_ids)
    assert "<think>\nLook first.\n</think>\n\nLooking.\n<tool_call>" in prompt
    assert "<tool_response>\nmain.py\n</tool_response><|im_end|>\n<|im_start|>user\nGo on.<|im_end|>" in prompt
    usage = reply.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == len(record.prompt_ids)

    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}, {"role": "user", "content": "Next."}]
    with anthropic_client.messages.stream(
        model="claude-haiku", max_tokens=8, system=system, messages=messages, tools=[BASH_ANTHROPIC], extra_body={"seed": 6}
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "message_delta" in kinds
    start_usage = events[0].message.usage
    assert start_usage.input_tokens >= 1 and start_usage.output_tokens >= 0
    first, second = proxy.records(execution[0])
    assert_extends(first, second)
    assert final.usage.output_tokens == len(second.response_ids)
    assert "".join(b.text for b in final.content if b.type == "text") == text_of_record(proxy, second)


def test_count_tokens_matches_the_recorded_prompt(anthropic_client, proxy, execution) -> None:
    body = {"model": "claude", "system": "S.", "messages": [{"role": "user", "content": "Hello there."}], "tools": [BASH_ANTHROPIC]}
    counted = anthropic_client.messages.count_tokens(**body)
    anthropic_client.messages.create(max_tokens=4, **body)
    (record,) = proxy.records(execution[0])
    assert counted.input_tokens == len(record.prompt_ids)


def test_sub_agent_and_header_roles(openai_client, proxy, execution) -> None:
    main = [{"role": "system", "content": "Main agent."}, {"role": "user", "content": "Task."}]
    sub = [{"role": "system", "content": "Explorer sub-agent."}, {"role": "user", "content": "Find."}]
    openai_client.chat.completions.create(model="m", messages=main, max_tokens=4)
    openai_client.chat.completions.create(model="m", messages=sub, max_tokens=4)
    openai_client.chat.completions.create(model="m", messages=main, max_tokens=4, extra_headers={"x-gyre-agent": "main-summary"})
    roles = [r.agent for r in proxy.records(execution[0])]
    assert roles == ["main", "sub", "main-summary"]


def test_models_and_authentication(server, openai_client, anthropic_client, execution) -> None:
    assert [m.id for m in openai_client.models.list()] == ["gyre"]
    bad_openai = openai.OpenAI(base_url=server.openai_base_url, api_key="gyre-nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="invalid API key"):
        bad_openai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    bad_anthropic = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="gyre-nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        bad_anthropic.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])
    assert info.value.body["error"]["type"] == "authentication_error"
    # An ended execution's key stops working.
    server.proxy.close_execution(execution[1])
    with pytest.raises(anthropic.AuthenticationError, match="ended or unknown"):
        anthropic_client.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])


def test_records_are_durable_jsonl(openai_client, proxy, execution) -> None:
    openai_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=4)
    path = proxy.recorder.path(execution[0])
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    assert CallRecord.from_dict(json.loads(lines[0])) == proxy.records(execution[0])[0]
