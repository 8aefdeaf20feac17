"""Chat rendering, parsing and token-exact incremental prompts with the tiny model's tokenizer."""

from __future__ import annotations

import pytest

from gyre.chat import (
    AgentClassifier,
    AgentHeaderError,
    ChatTemplate,
    Conversation,
    Message,
    PromptBuilder,
    Tool,
    ToolCall,
    parse_output,
)

BASH = Tool("bash", "Run a shell command.", {"type": "object", "properties": {"cmd": {"type": "string"}}})


@pytest.fixture(scope="module")
def template() -> ChatTemplate:
    from gyre.models import load_tokenizer

    return ChatTemplate(load_tokenizer("tiny"))


def respond(builder: PromptBuilder, template: ChatTemplate, plan, call_id: str, text: str, *, stop: bool = True):
    """Pretend the model wrote ``text``: commit it and return the assistant message a client would get."""
    ids = template.encode(text) + ([template.eos_token_id] if stop else [])
    parsed = parse_output(template.decode_response(ids))
    calls = tuple(ToolCall(f"{call_id}-t{i}", c.name, c.arguments) for i, c in enumerate(parsed.tool_calls))
    assistant = Message("assistant", parsed.content, parsed.reasoning, calls)
    builder.commit(plan, call_id, ids, assistant, stopped=stop)
    return ids, assistant


def test_multi_turn_with_tool_calls_is_one_growing_path(template: ChatTemplate) -> None:
    builder = PromptBuilder(template)
    messages = [Message("system", "You are a coder."), Message("user", "List the files.")]
    plan1 = builder.plan(Conversation(tuple(messages), (BASH,)))
    assert plan1.parent_call_id is None
    out1 = '<think>\nI should look.\n</think>\n\nLet me check.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls -la"}}\n</tool_call>'
    ids1, assistant1 = respond(builder, template, plan1, "c1", out1)
    assert assistant1.reasoning == "I should look." and assistant1.content == "Let me check."
    assert assistant1.tool_calls[0].name == "bash"

    # The client echoes the call back re-serialised (compact JSON) and adds the tool result.
    echoed = Message(
        "assistant",
        assistant1.content,
        assistant1.reasoning,
        (ToolCall(assistant1.tool_calls[0].id, "bash", '{"cmd":"ls -la"}'),),
    )
    messages += [echoed, Message("tool", "a.py b.py", tool_call_id=assistant1.tool_calls[0].id)]
    plan2 = builder.plan(Conversation(tuple(messages), (BASH,)))
    assert plan2.parent_call_id == "c1", plan2.reason
    assert plan2.prompt_ids[: len(plan1.prompt_ids) + len(ids1)] == plan1.prompt_ids + ids1
    assert plan2.reused_tokens == len(plan1.prompt_ids) + len(ids1)
    # The model wrote its turn exactly as the template would, so the spliced prompt decodes to the rendering.
    assert template.decode(plan2.prompt_ids) == template.render_prompt(plan2.conversation)

    ids2, assistant2 = respond(builder, template, plan2, "c2", "Two files.")
    messages += [assistant2, Message("user", "Thanks. Now read a.py")]
    plan3 = builder.plan(Conversation(tuple(messages), (BASH,)))
    assert plan3.parent_call_id == "c2"
    assert plan3.prompt_ids[: len(plan2.prompt_ids) + len(ids2)] == plan2.prompt_ids + ids2


def test_generated_tokens_are_reused_even_when_retokenising_would_differ(template: ChatTemplate) -> None:
    """The model's own token split (here: one char at a time) survives; the text is never re-tokenised."""
    builder = PromptBuilder(template)
    messages = [Message("user", "hello")]
    plan1 = builder.plan(Conversation(tuple(messages)))
    text = "the answer"
    ids1 = [tid for ch in text for tid in template.encode(ch)] + [template.eos_token_id]
    assert ids1[:-1] != template.encode(text)
    builder.commit(plan1, "c1", ids1, Message("assistant", text), stopped=True)
    plan2 = builder.plan(Conversation((*messages, Message("assistant", text), Message("user", "more"))))
    assert plan2.parent_call_id == "c1"
    assert plan2.prompt_ids[: len(plan1.prompt_ids) + len(ids1)] == plan1.prompt_ids + ids1
    assert plan2.new_tokens == len(plan2.prompt_ids) - len(plan1.prompt_ids) - len(ids1)


def test_cut_response_gets_its_end_of_turn_from_the_text(template: ChatTemplate) -> None:
    builder = PromptBuilder(template)
    plan1 = builder.plan(Conversation((Message("user", "count"),)))
    ids1, assistant = respond(builder, template, plan1, "c1", "one two", stop=False)
    plan2 = builder.plan(Conversation((Message("user", "count"), assistant, Message("user", "go on"))))
    assert plan2.parent_call_id == "c1"
    rest = plan2.prompt_ids[len(plan1.prompt_ids) + len(ids1) :]
    assert rest[0] == template.eos_token_id  # the turn is closed by the text after it
    assert template.decode(plan2.prompt_ids) == template.render_prompt(plan2.conversation)


@pytest.mark.parametrize(
    "edit",
    ["system", "user", "reasoning_dropped", "tool_args", "tool_id", "tools", "assistant_text"],
)
def test_rewritten_history_starts_a_new_branch(template: ChatTemplate, edit: str) -> None:
    builder = PromptBuilder(template)
    base = [Message("system", "sys"), Message("user", "do it")]
    plan1 = builder.plan(Conversation(tuple(base), (BASH,)))
    out = '<think>\nplan\n</think>\n\nok\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "pwd"}}\n</tool_call>'
    _, assistant = respond(builder, template, plan1, "c1", out)
    call = assistant.tool_calls[0]
    tools = (BASH,)
    if edit == "system":
        base = [Message("system", "a different system prompt"), base[1]]
    elif edit == "user":
        base = [base[0], Message("user", "do something else")]
    elif edit == "reasoning_dropped":
        assistant = Message("assistant", assistant.content, "", assistant.tool_calls)
    elif edit == "tool_args":
        assistant = Message("assistant", assistant.content, assistant.reasoning, (ToolCall(call.id, "bash", '{"cmd": "ls"}'),))
    elif edit == "tool_id":
        assistant = Message("assistant", assistant.content, assistant.reasoning, (ToolCall("other", "bash", call.arguments),))
    elif edit == "tools":
        tools = (BASH, Tool("read", "Read a file."))
    elif edit == "assistant_text":
        assistant = Message("assistant", "I did something else", assistant.reasoning, assistant.tool_calls)
    conversation = Conversation((*base, assistant, Message("tool", "/tmp", tool_call_id=call.id)), tools)
    plan2 = builder.plan(conversation)
    assert plan2.parent_call_id is None
    assert plan2.reason.startswith("new branch")
    assert plan2.prompt_ids == template.encode(template.render_prompt(conversation))


def test_extends_the_longest_matching_call_and_evicts_old_calls(template: ChatTemplate) -> None:
    builder = PromptBuilder(template, max_calls=2)
    messages: list[Message] = [Message("user", "start")]
    parents = []
    for turn in range(4):
        plan = builder.plan(Conversation(tuple(messages)))
        parents.append(plan.parent_call_id)
        _, assistant = respond(builder, template, plan, f"c{turn}", f"reply {turn}")
        messages += [assistant, Message("user", f"next {turn}")]
    assert parents == [None, "c0", "c1", "c2"]
    assert len(builder) == 2
    # A retry of turn 0's continuation: c0 was evicted, so it is a new branch (never a guess).
    retry = builder.plan(Conversation(tuple(messages[:3])))
    assert retry.parent_call_id is None


def test_parser_splits_reasoning_content_and_tool_calls() -> None:
    out = parse_output(
        '<think>\nhmm\n</think>\n\nSure.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "read", "arguments": "{\\"path\\": \\"a\\"}"}\n</tool_call>'
    )
    assert out.reasoning == "hmm" and out.content == "Sure."
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("bash", '{"cmd": "ls"}'), ("read", '{"path": "a"}')]


@pytest.mark.parametrize(
    "block",
    [
        "<tool_call>\n{not json}\n</tool_call>",
        '<tool_call>\n{"arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "bash", "arguments": [1, 2]}\n</tool_call>',
        '<tool_call>\n["bash"]\n</tool_call>',
        '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}',
    ],
)
def test_malformed_tool_calls_stay_as_text(block: str) -> None:
    text = f"before {block} after"
    out = parse_output(text)
    assert out.tool_calls == [] and out.content == text


def test_malformed_call_next_to_a_valid_one_is_kept() -> None:
    bad = "<tool_call>\n{oops}\n</tool_call>"
    out = parse_output(f'{bad}\n<tool_call>\n{{"name": "bash", "arguments": {{}}}}\n</tool_call>')
    assert [c.name for c in out.tool_calls] == ["bash"] and out.content == bad


def test_think_opened_by_the_prompt_ends_at_its_closing_tag() -> None:
    out = parse_output("\nweighing options\n</think>\n\nDone.", think_opened=True)
    assert (out.reasoning, out.content) == ("weighing options", "Done.")
    assert parse_output("stray </think> token").content == "stray </think> token"  # only when opened


def test_tool_parsing_can_be_turned_off_and_unclosed_think_is_content() -> None:
    text = '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>'
    assert parse_output(text, parse_tools=False).content == text
    assert parse_output("<think>\nnever closed").content == "<think>\nnever closed"


def test_agent_roles() -> None:
    roles = AgentClassifier()
    main = Conversation((Message("system", "main agent"), Message("user", "task")))
    sub = Conversation((Message("system", "explorer sub-agent"), Message("user", "find x")))
    summary = Conversation((*main.messages, Message("assistant", "x"), Message("user", "Create a detailed summary of the conversation so far.")))
    assert roles.classify(main).role == "main"
    assert roles.classify(sub).role == "sub" and roles.classify(sub).lineage == 1
    assert roles.classify(summary).role == "main-summary"
    assert roles.classify(main, "sub-summary").role == "sub-summary"
    with pytest.raises(AgentHeaderError, match="x-gyre-agent"):
        roles.classify(main, "boss")
    assert AgentClassifier(summary_pattern=None).classify(summary).role == "main"


def test_template_errors_name_the_problem(template: ChatTemplate) -> None:
    with pytest.raises(ValueError, match="system message is only allowed first"):
        Conversation((Message("user", "a"), Message("system", "b")))


def test_direct_rendering_matches_apply_chat_template(template: ChatTemplate) -> None:
    """The fast path renders exactly what transformers' apply_chat_template renders."""
    conversation = Conversation(
        (
            Message("system", "sys"),
            Message("user", "hi"),
            Message("assistant", "ok", "thinking it over", (ToolCall("c1", "bash", '{"cmd": "ls"}'),)),
            Message("tool", "a b", tool_call_id="c1"),
            Message("user", "thanks"),
        ),
        (BASH,),
    )
    expected = template.tokenizer.apply_chat_template(
        [m.to_template() for m in conversation.messages],
        tools=[t.to_template() for t in conversation.tools],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert template.render_prompt(conversation) == expected
