"""Token-exact incremental prompts: a call that continues an earlier call reuses that call's exact tokens.

Why: re-tokenising a conversation's text does not, in general, give back the tokens the policy produced
(BPE merges across the boundary, re-serialised tool-call JSON, whitespace the parser trimmed). Training on
a re-tokenised history would train on tokens the policy never sampled and whose log-probs were never
recorded. So for each execution we keep its recent calls (conversation, prompt text, prompt ids, response
ids, the assistant message we returned) and, when a request's conversation is

    <that call's messages> + <an assistant message equal to what we returned for it> + <new messages>

with the same tools, its prompt is ``call.prompt_ids + call.response_ids + encode(new text)``: only the
text after the generated turn (the template's closing of the turn, tool results, new user turns and the
next generation prompt) is tokenized. The new text is found by rendering with the template and checking
that the earlier call's rendered prompt is a prefix of the new rendering; the generated turn itself is
never re-rendered into tokens.

Anything else starts a new branch rendered and tokenized from scratch, and the plan says why: a rewritten
or truncated history, a changed system prompt or tool list, reasoning the client dropped, a tool call
whose id/name/arguments changed, or a template that renders earlier turns differently once more turns
follow (e.g. one that drops old reasoning). We never guess which earlier call a request meant.

Echoed assistant text is compared exactly, or after stripping surrounding whitespace (clients commonly
trim); tool calls are matched by id, then name, then arguments as JSON values (clients re-serialise them).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from gyre.chat.messages import Conversation, Message, tools_key
from gyre.chat.template import ChatTemplate


@dataclass(eq=False)  # identity semantics: nodes are removed from index buckets by identity
class CallNode:
    """What a completed call leaves behind for later calls to extend."""

    call_id: str
    conversation: Conversation
    prompt_text: str
    prompt_ids: list[int]
    response_ids: list[int]
    assistant: Message
    stopped: bool  # the response ended with the end-of-turn token (not cut by max_tokens or a stop string)
    key: int = 0  # prefix hash of (tools, messages): the index bucket it lives in


@dataclass
class PromptPlan:
    """The prompt for one request, and where it came from."""

    conversation: Conversation
    prompt_ids: list[int]
    parent_call_id: str | None  # the call whose tokens this prompt extends, or None for a new branch
    reused_tokens: int  # prompt tokens copied from the parent call (its prompt + response)
    new_tokens: int  # prompt tokens tokenized for this request
    reason: str  # "extends <call>" or why this is a new branch
    prompt_text: str = ""  # the template's rendering of the conversation (kept for later extensions)


def assistant_mismatch(echoed: Message, produced: Message) -> str | None:
    """Why ``echoed`` (from a client's history) is not the assistant turn we returned, or None if it is."""
    if echoed.role != "assistant":
        return f"expected the assistant turn, found a {echoed.role} message"
    if echoed.content != produced.content and echoed.content.strip() != produced.content.strip():
        return "assistant text differs from what the model produced"
    if echoed.reasoning.strip() != produced.reasoning.strip():
        return "assistant reasoning was dropped or changed"
    if len(echoed.tool_calls) != len(produced.tool_calls):
        return f"{len(echoed.tool_calls)} tool calls echoed, {len(produced.tool_calls)} produced"
    for mine, theirs in zip(produced.tool_calls, echoed.tool_calls):
        if not mine.same_call(theirs):
            return f"tool call {theirs.id!r} does not match produced call {mine.id!r} ({mine.name})"
    return None


def prefix_hashes(conversation: Conversation) -> list[int]:
    """``h[k]`` identifies (tools, messages[:k]); computed incrementally so lookups stay linear."""
    current = hash(tools_key(conversation.tools))
    hashes = [current]
    for message in conversation.messages:
        current = hash((current, message))
        hashes.append(current)
    return hashes


class PromptBuilder:
    """Per-execution history of calls, and the prompt planning that reuses their tokens.

    Only the ``max_calls`` most recently used calls are kept as extension points: memory stays bounded on
    executions of hundreds of calls, while the tips that harnesses actually continue stay available.
    """

    def __init__(self, template: ChatTemplate, *, max_calls: int = 64) -> None:
        if max_calls < 1:
            raise ValueError(f"max_calls must be >= 1, got {max_calls}")
        self.template = template
        self.max_calls = max_calls
        self._calls: OrderedDict[str, CallNode] = OrderedDict()
        self._index: dict[int, list[CallNode]] = {}

    def plan(self, conversation: Conversation) -> PromptPlan:
        """The prompt ids for ``conversation``: an extension of an earlier call where one matches exactly."""
        hashes = prefix_hashes(conversation)
        messages = conversation.messages
        reason = "no earlier call of this execution matches the history"
        for k in range(len(messages) - 1, 0, -1):
            if messages[k].role != "assistant":
                continue
            for node in reversed(self._index.get(hashes[k], [])):
                if node.conversation.messages != messages[:k] or node.conversation.tools != conversation.tools:
                    continue  # a hash collision
                mismatch = assistant_mismatch(messages[k], node.assistant)
                if mismatch is not None:
                    reason = f"history continues call {node.call_id} but {mismatch}"
                    continue
                plan = self._extend(node, conversation, k)
                if isinstance(plan, PromptPlan):
                    self._calls.move_to_end(node.call_id)
                    return plan
                reason = plan
        return self._from_scratch(conversation, reason)

    def _extend(self, node: CallNode, conversation: Conversation, k: int) -> PromptPlan | str:
        """Splice ``node``'s tokens with the newly rendered text after its turn, or say why that fails."""
        template = self.template
        messages, tools = conversation.messages, conversation.tools
        through = template.render(messages[: k + 1], tools, generation_prompt=False)
        if not through.startswith(node.prompt_text):
            return f"the template renders call {node.call_id}'s prompt differently once its reply follows"
        turn = through[len(node.prompt_text) :]
        cut = turn.rfind(template.eos_text)
        if cut < 0:
            return f"the rendered assistant turn has no end-of-turn marker {template.eos_text!r}"
        # A stopped response already ends with the end-of-turn token; a cut one needs it from the text.
        tail = turn[cut + len(template.eos_text) :] if node.stopped else turn[cut:]
        full = template.render(messages, tools, generation_prompt=True)
        if not full.startswith(through):
            return f"the template rewrites history after call {node.call_id} (e.g. drops earlier reasoning)"
        new_ids = template.encode(tail + full[len(through) :])
        reused = len(node.prompt_ids) + len(node.response_ids)
        return PromptPlan(
            conversation=conversation,
            prompt_ids=node.prompt_ids + node.response_ids + new_ids,
            parent_call_id=node.call_id,
            reused_tokens=reused,
            new_tokens=len(new_ids),
            reason=f"extends {node.call_id}",
            prompt_text=full,
        )

    def _from_scratch(self, conversation: Conversation, reason: str) -> PromptPlan:
        text = self.template.render_prompt(conversation)
        ids = self.template.encode(text)
        return PromptPlan(conversation, ids, None, 0, len(ids), f"new branch: {reason}", text)

    def commit(self, plan: PromptPlan, call_id: str, response_ids: list[int], assistant: Message, *, stopped: bool) -> None:
        """Remember a completed call (one the client received) so that later requests can extend it."""
        prompt_text = plan.prompt_text or self.template.render_prompt(plan.conversation)
        key = prefix_hashes(plan.conversation)[-1]
        node = CallNode(
            call_id, plan.conversation, prompt_text, plan.prompt_ids, list(response_ids), assistant, stopped, key
        )
        self._calls[call_id] = node
        self._index.setdefault(key, []).append(node)
        while len(self._calls) > self.max_calls:
            _, old = self._calls.popitem(last=False)
            bucket = self._index[old.key]
            bucket.remove(old)
            if not bucket:
                del self._index[old.key]

    def __len__(self) -> int:
        return len(self._calls)
