"""Incremental prompt rendering gives exactly the full rendering's tokens, on long agent conversations."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass

import pytest

from gyre.chat import ChatTemplate, Conversation, Message, PromptBuilder, Tool, ToolCall, parse_output
from gyre.chat.tokens import TokenSeq

TOOLS = (
    Tool("bash", "Run a shell command.", {"type": "object", "properties": {"cmd": {"type": "string"}}}),
    Tool("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
)
MAIN_SYSTEM = Message("system", "You are a coding agent. Fix the repository's failing test.")
SUB_SYSTEM = Message("system", "You are a sub-agent. Investigate and report back briefly.")
SUMMARY_ASK = "Summarize the conversation so far."


@pytest.fixture(scope="module")
def template() -> ChatTemplate:
    from gyre.models import load_tokenizer

    return ChatTemplate(load_tokenizer("tiny"))


@dataclass
class Call:
    conversation: Conversation
    response_ids: list[int]
    assistant: Message
    stopped: bool


class Agent:
    """A scripted harness: a main agent with tool calls and reasoning, sub-agents and summaries."""

    def __init__(self, template: ChatTemplate, seed: int) -> None:
        self.template, self.rng = template, random.Random(seed)
        self.calls: list[Call] = []

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(["test", "file", "fix", "bug", "line", "return", "value", "ok", "42", "x.py"])
                        for _ in range(self.rng.randint(low, high)))

    def respond(self, builder: PromptBuilder, messages: list[Message], tools: tuple[Tool, ...]) -> Message:
        """One model call through ``builder``: plan, a made-up response, commit."""
        conversation = Conversation(tuple(messages), tools)
        plan = builder.plan(conversation)
        text = self.words(2, 12)
        if self.rng.random() < 0.4:
            text = f"<think>\n{self.words(3, 10)}\n</think>\n\n{text}"
        if tools and self.rng.random() < 0.6:
            for _ in range(self.rng.randint(1, 2)):
                name = self.rng.choice(["bash", "read"])
                arguments = {"cmd": self.words(1, 4)} if name == "bash" else {"path": f"src/{self.words(1, 1)}"}
                text += f"\n<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
        stopped = self.rng.random() > 0.1  # now and then a response cut by max_tokens
        ids = self.template.encode(text) + ([self.template.eos_token_id] if stopped else [])
        parsed = parse_output(self.template.decode_response(ids), parse_tools=bool(tools))
        n = len(self.calls)
        calls = tuple(ToolCall(f"call_{n}_{i}", c.name, c.arguments) for i, c in enumerate(parsed.tool_calls))
        assistant = Message("assistant", parsed.content, parsed.reasoning, calls)
        builder.commit(plan, f"c{len(self.calls)}", ids, assistant, stopped=stopped)
        self.calls.append(Call(conversation, ids, assistant, stopped))
        return assistant

    def run(self, builder: PromptBuilder, turns: int) -> None:
        task = Message("user", f"The test fails with: {self.words(10, 30)}")
        main: list[Message] = [MAIN_SYSTEM, task]
        for turn in range(turns):
            assistant = self.respond(builder, main, TOOLS)
            # Clients echo the turn back, some with re-serialised tool arguments and trimmed text.
            echoed = Message("assistant", assistant.content.strip(), assistant.reasoning, tuple(
                ToolCall(c.id, c.name, json.dumps(json.loads(c.arguments), separators=(",", ":")))
                for c in assistant.tool_calls))
            main.append(echoed)
            if assistant.tool_calls:
                main += [Message("tool", "\n".join(self.words(3, 15) for _ in range(self.rng.randint(1, 8))),
                                 tool_call_id=c.id) for c in assistant.tool_calls]
            else:
                main.append(Message("user", self.words(2, 8)))
            if turn % 9 == 4:  # a sub-agent with its own system prompt, interleaved with the main agent
                sub = [SUB_SYSTEM, Message("user", f"Look into {self.words(2, 5)}")]
                for _ in range(3):
                    sub += [self.respond(builder, sub, TOOLS[:1]), Message("user", self.words(1, 5))]
            if turn % 13 == 12:  # context compaction: summarise, then restart from the summary
                summary = self.respond(builder, [*main, Message("user", SUMMARY_ASK)], TOOLS)
                main = [MAIN_SYSTEM, Message("user", f"{task.content}\nSummary so far: {summary.content}")]


def replay_full(template: ChatTemplate, calls: list[Call]) -> list:
    """The same calls through a builder that always renders the whole conversation."""
    builder, plans = PromptBuilder(template, incremental=False), []
    for index, call in enumerate(calls):
        plans.append(builder.plan(call.conversation))
        builder.commit(plans[-1], f"c{index}", call.response_ids, call.assistant, stopped=call.stopped)
    return plans


def test_incremental_equals_full_rendering_on_a_long_agent_conversation(template: ChatTemplate) -> None:
    agent = Agent(template, seed=3)
    builder = PromptBuilder(template)
    plans = []
    original_plan = builder.plan
    builder.plan = lambda conversation: plans.append(original_plan(conversation)) or plans[-1]  # type: ignore[method-assign]
    agent.run(builder, turns=90)
    full = replay_full(template, agent.calls)
    assert len(plans) == len(full) > 110
    for index, (quick, slow) in enumerate(zip(plans, full)):
        assert quick.parent_call_id == slow.parent_call_id, index
        assert quick.prompt_ids == slow.prompt_ids, f"call {index} ({quick.rendering}): tokens differ"
    renderings = [plan.rendering for plan in plans]
    extensions = [plan for plan in plans if plan.parent_call_id]
    assert len(extensions) > 0.7 * len(plans)  # the harness mostly continues its own calls
    assert renderings.count("incremental") > 0.6 * len(extensions) and "checked" in renderings
    assert "full" not in renderings  # this template renders a message from its neighbours only
    # Each prompt shares the tokens of the call it continues (no copy of the history per call).
    by_id = {f"c{i}": plan for i, plan in enumerate(plans)}
    for plan in extensions:
        assert plan.tokens.parent is not None and plan.tokens.parent.label == plan.parent_call_id
        assert plan.tokens.starts_with(by_id[plan.parent_call_id].tokens)


def test_a_template_that_numbers_messages_keeps_the_full_path_and_says_so(template: ChatTemplate) -> None:
    """Rendering that depends on a message's absolute index is not prefix-stable for a shortened
    conversation: the first check catches it, and that shape stays on the full path."""
    numbered = copy.copy(template.tokenizer)
    numbered.chat_template = template.tokenizer.chat_template.replace(
        "'<|im_start|>user\\n' + text(message.content)",
        "'<|im_start|>user ' ~ loop.index0 ~ '\\n' + text(message.content)",
    )
    assert numbered.chat_template != template.tokenizer.chat_template
    numbered_template = ChatTemplate(numbered)
    agent = Agent(numbered_template, seed=5)
    builder = PromptBuilder(numbered_template)
    plans = []
    original_plan = builder.plan
    builder.plan = lambda conversation: plans.append(original_plan(conversation)) or plans[-1]  # type: ignore[method-assign]
    agent.run(builder, turns=12)
    full = replay_full(numbered_template, agent.calls)
    assert [p.prompt_ids for p in plans] == [p.prompt_ids for p in full]
    main = [p.rendering for p in plans if p.parent_call_id and p.conversation.messages[0] == MAIN_SYSTEM]
    assert "incremental" not in main  # the per-call agreement check never let a shortened rendering through
    first_full = main.index("full")
    assert set(main[first_full:]) == {"full"}  # once the check failed, the shape stays on the full path
    assert any("not exact for this conversation shape" in p.rendering_note for p in plans)


def test_token_sequences_share_prefixes_and_read_as_lists() -> None:
    root = TokenSeq.of([5, 6, 7])
    child = root.extend([8], label="c1")
    grandchild = child.extend([9, 10])
    assert grandchild == [5, 6, 7, 8, 9, 10] and len(grandchild) == 6 and grandchild[3] == 8
    assert grandchild[-1] == 10 and grandchild[1:3] == [6, 7] and list(grandchild) == grandchild.tolist()
    assert grandchild + [11] == [5, 6, 7, 8, 9, 10, 11] and grandchild.bounds() == (5, 10)
    assert grandchild.starts_with(child) and not child.starts_with(grandchild)
    assert grandchild.own.tolist() == [9, 10] and grandchild.parent is child  # only new tokens are stored
    with pytest.raises(ValueError, match="out of range"):
        TokenSeq.of([-1])
