"""Token-exact calls from a whole conversation: what the proxy would have recorded had it served it.

A transcript (an OpenAI messages + tools conversation a user already has) and a scripted demonstration
replayed through the proxy must train the same tokens. Both go through the same two pieces: an assistant
turn is tokenized as the text the template gives it (`turn_text`), and each turn's prompt is planned by
the proxy's own `PromptBuilder`, so a turn that continues an earlier one reuses that turn's tokens
exactly as the proxy does for a live harness.
"""

from __future__ import annotations

from collections.abc import Sequence

from gyre.chat.history import PromptBuilder
from gyre.chat.messages import Conversation, Message, Tool
from gyre.chat.template import ChatFormatError, ChatTemplate

# Context for rendering a turn on its own: chat templates open a conversation with a user turn.
_OPENING = (Message("user", "-"),)


def turn_text(
    template: ChatTemplate,
    message: Message,
    context: Sequence[Message] = _OPENING,
    tools: tuple[Tool, ...] = (),
) -> str:
    """The text a model generates for assistant ``message`` after ``context``: everything the template
    writes after the generation prompt, through the end-of-turn marker (whose token stops generation)."""
    if message.role != "assistant":
        raise ValueError(f"turn_text renders assistant turns, got a {message.role} message")
    before = template.render(tuple(context), tools, generation_prompt=True)
    after = template.render((*context, message), tools, generation_prompt=False)
    if not after.startswith(before):
        raise ChatFormatError("the template renders the conversation differently once the assistant turn follows")
    turn = after[len(before) :]
    end = turn.find(template.eos_text)
    if end < 0:
        raise ChatFormatError(f"the rendered assistant turn has no end-of-turn marker {template.eos_text!r}")
    return turn[: end + len(template.eos_text)]


def replay_conversation(template: ChatTemplate, conversation: Conversation) -> list[tuple[list[int], list[int]]]:
    """``(prompt_ids, response_ids)`` of every assistant turn of ``conversation``, in order, as the proxy
    would have recorded them for a harness that sent this conversation one turn at a time."""
    builder = PromptBuilder(template, max_calls=max(1, len(conversation.messages)))
    calls: list[tuple[list[int], list[int]]] = []
    messages = conversation.messages
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        if index == 0:
            raise ChatFormatError("the conversation starts with an assistant turn: there is no prompt before it")
        plan = builder.plan(Conversation(messages[:index], conversation.tools))
        response_ids = template.encode(turn_text(template, message, messages[:index], conversation.tools))
        builder.commit(plan, f"turn-{index}", response_ids, message, stopped=True)
        calls.append((plan.prompt_ids, response_ids))
    return calls
