"""Token-exact incremental prompts: a call that continues an earlier call reuses that call's exact tokens.

Why: re-tokenising a conversation's text does not, in general, give back the tokens the policy produced
(BPE merges across the boundary, re-serialised tool-call JSON, whitespace the parser trimmed). Training on
a re-tokenised history would train on tokens the policy never sampled and whose log-probs were never
recorded. So for each execution we keep its recent calls (conversation, tokens, the assistant message we
returned) and, when a request's conversation is

    <that call's messages> + <an assistant message equal to what we returned for it> + <new messages>

with the same tools, its prompt is ``call.prompt_ids + call.response_ids + encode(new text)``: only the
text after the generated turn (the template's closing of the turn, tool results, new user turns and the
next generation prompt) is tokenized. The generated turn itself is never re-rendered into tokens.

Finding the new text (``rendering``):

- ``full``: render the earlier call's conversation, the same through its reply, and the whole request;
  each must be a prefix of the next, and the new text is what the last adds. Time grows with the
  conversation.
- ``incremental``: the same three renderings of a short conversation: the first message when it is the
  system prompt, the message before the earlier call's reply, the reply and the new messages. Time grows
  with the new messages only. This is right for templates that render a message from its neighbours (as
  ChatML templates do), not for one that, say, renders a turn differently by its absolute index or by a
  message far back. Every call renders the short conversation a second time with one more message of
  context and needs the same text (this catches position-dependent templates at once); and each
  conversation shape (system prompt and tool names) is checked against the full path at its 1st, 2nd,
  4th, 8th, ... extension and then every ``check_every`` (this catches look-back rules such as "reasoning
  only after the last user query"). A shape whose check fails keeps the full path for good; a failed
  incremental rendering (an error, a prefix or agreement check) falls back to the full path for that call
  and checks the next. The plan (and so the record) says which path gave the prompt.

Anything else starts a new branch rendered and tokenized from scratch, and the plan says why: a rewritten
or truncated history, a changed system prompt or tool list, reasoning the client dropped, a tool call
whose id/name/arguments changed, or a template that renders earlier turns differently once more turns
follow (e.g. one that drops old reasoning). We never guess which earlier call a request meant.

Memory: a call's node keeps its conversation (message objects shared with the call it extends) and its
tokens as a ``TokenSeq`` (only the tokens it added; the rest is shared), so the history grows with the
execution's new tokens, not with calls times conversation length.

Echoed assistant text is compared exactly, or after stripping surrounding whitespace (clients commonly
trim); tool calls are matched by id, then name, then arguments as JSON values (clients re-serialise them).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from gyre.chat.messages import Conversation, Message, same_messages
from gyre.chat.template import ChatTemplate
from gyre.chat.tokens import TokenSeq

RENDERINGS = ("scratch", "full", "incremental", "checked")


@dataclass(eq=False)  # identity semantics: nodes are removed from index buckets by identity
class CallNode:
    """What a completed call leaves behind for later calls to extend."""

    call_id: str
    conversation: Conversation
    tokens: TokenSeq  # prompt + response; ``tokens.label`` is the call id
    prompt_tokens: int
    assistant: Message
    stopped: bool  # the response ended with the end-of-turn token (not cut by max_tokens or a stop string)

    @property
    def key(self) -> tuple[int, Message]:
        return index_key(self.conversation.messages, len(self.conversation.messages))


@dataclass
class PromptPlan:
    """The prompt for one request, and where it came from."""

    conversation: Conversation
    tokens: TokenSeq  # the prompt; extends the parent call's prompt + response when there is one
    parent_call_id: str | None  # the call whose tokens this prompt extends, or None for a new branch
    reused_tokens: int  # prompt tokens copied from the parent call (its prompt + response)
    new_tokens: int  # prompt tokens tokenized for this request
    reason: str  # "extends <call>" or why this is a new branch
    rendered: str = ""  # the template text tokenized for this request (ends with the generation prompt)
    rendering: str = "scratch"  # scratch | full | incremental | checked (incremental, compared with full)
    rendering_note: str = ""  # why the full path was taken, when it was

    @property
    def prompt_ids(self) -> list[int]:
        """The prompt as a plain list (flattens the shared tokens: time per prompt token)."""
        return self.tokens.tolist()


@dataclass
class _ShapeChecks:
    """Incremental rendering's record for one conversation shape."""

    extensions: int = 0
    next_check: int = 1
    stable: bool = True  # False: this shape keeps the full path


@dataclass
class _NewText:
    turn: str  # the template's text of the earlier call's reply turn
    new: str  # what follows it up to and including the generation prompt
    rendering: str
    note: str = ""


def index_key(messages: tuple[Message, ...], k: int) -> tuple[int, Message]:
    """Bucket of a call whose conversation is ``messages[:k]``: its length and last message (hashing one
    message, not the whole history)."""
    return (k, messages[k - 1])


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


class PromptBuilder:
    """Per-execution history of calls, and the prompt planning that reuses their tokens.

    Only the ``max_calls`` most recently used calls are kept as extension points: the tips that harnesses
    actually continue stay available, and the tokens of older calls live on only as shared prefixes.
    ``check_every`` bounds the interval between checks of incremental against full rendering (above);
    ``incremental=False`` keeps every extension on the full path.
    """

    def __init__(
        self, template: ChatTemplate, *, max_calls: int = 64, check_every: int = 64, incremental: bool = True
    ) -> None:
        if max_calls < 1:
            raise ValueError(f"max_calls must be >= 1, got {max_calls}")
        if check_every < 1:
            raise ValueError(f"check_every must be >= 1, got {check_every}")
        self.template = template
        self.max_calls = max_calls
        self.check_every = check_every
        self.incremental = incremental
        self._calls: OrderedDict[str, CallNode] = OrderedDict()
        self._index: dict[tuple[int, Message], list[CallNode]] = {}
        self._shapes: dict[tuple, _ShapeChecks] = {}

    def plan(self, conversation: Conversation) -> PromptPlan:
        """The prompt ids for ``conversation``: an extension of an earlier call where one matches exactly."""
        messages = conversation.messages
        reason = "no earlier call of this execution matches the history"
        for k in range(len(messages) - 1, 0, -1):
            if messages[k].role != "assistant":
                continue
            for node in reversed(self._index.get(index_key(messages, k), [])):
                same = node.conversation.tools == conversation.tools
                if not same or not same_messages(node.conversation.messages, messages[:k]):
                    continue  # another conversation with the same length and last message
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
        text = self._new_text(node, conversation, k)
        if isinstance(text, str):
            return text
        eos = self.template.eos_text
        cut = text.turn.rfind(eos)
        if cut < 0:
            return f"the rendered assistant turn has no end-of-turn marker {eos!r}"
        # A stopped response already ends with the end-of-turn token; a cut one needs it from the text.
        tail = text.turn[cut + len(eos) :] if node.stopped else text.turn[cut:]
        rendered = tail + text.new
        new_ids = self.template.encode(rendered)
        # Share the parent's message objects (equal to the request's) so the history holds each text once.
        shared = Conversation(node.conversation.messages + conversation.messages[k:], node.conversation.tools)
        return PromptPlan(
            conversation=shared,
            tokens=node.tokens.extend(new_ids),
            parent_call_id=node.call_id,
            reused_tokens=len(node.tokens),
            new_tokens=len(new_ids),
            reason=f"extends {node.call_id}",
            rendered=rendered,
            rendering=text.rendering,
            rendering_note=text.note,
        )

    def _new_text(self, node: CallNode, conversation: Conversation, k: int) -> _NewText | str:
        """The text of the earlier call's turn and of what follows it: incrementally where this shape has
        been shown to allow it, checked against the full rendering on schedule (module docstring)."""
        if not self.incremental:
            return self._full_text(node, conversation, k, "incremental rendering is off")
        shape = self._shapes.setdefault(shape_key(conversation), _ShapeChecks())
        shape.extensions += 1
        if not shape.stable:
            return self._full_text(node, conversation, k, "this conversation shape renders differently in part")
        if shape.extensions < shape.next_check:
            quick = self._incremental_text(conversation, k)
            if isinstance(quick, _NewText):
                return quick
            shape.next_check = shape.extensions + 1  # check the next extension in full as well
            return self._full_text(node, conversation, k, f"incremental rendering failed: {quick}")
        shape.next_check = min(2 * shape.extensions, shape.extensions + self.check_every)
        full = self._full_text(node, conversation, k, "")
        if isinstance(full, str):
            return full
        quick = self._incremental_text(conversation, k)
        if isinstance(quick, _NewText) and (quick.turn, quick.new) == (full.turn, full.new):
            return _NewText(full.turn, full.new, "checked")
        shape.stable = False
        why = quick if isinstance(quick, str) else "its text differs from the full rendering"
        full.note = f"incremental rendering is not exact for this conversation shape ({why}); full path from now on"
        return full

    def _full_text(self, node: CallNode, conversation: Conversation, k: int, note: str) -> _NewText | str:
        template = self.template
        messages, tools = conversation.messages, conversation.tools
        before = template.render(messages[:k], tools, generation_prompt=True)
        through = template.render(messages[: k + 1], tools, generation_prompt=False)
        if not through.startswith(before):
            return f"the template renders call {node.call_id}'s prompt differently once its reply follows"
        full = template.render(messages, tools, generation_prompt=True)
        if not full.startswith(through):
            return f"the template rewrites history after call {node.call_id} (e.g. drops earlier reasoning)"
        return _NewText(through[len(before) :], full[len(through) :], "full", note)

    def _incremental_text(self, conversation: Conversation, k: int) -> _NewText | str:
        """The same texts from a short conversation: [system] + the message before the reply + the rest. A
        second rendering with one more message of context must agree (a per-call check that catches
        templates that render by absolute position or look further back)."""
        messages = conversation.messages
        head = messages[:1] if messages[0].role == "system" else ()
        start = max(k - 1, len(head))
        try:
            turn, new = self._short_render(conversation, head + messages[start:k], k)
            wider = head + messages[start - 1 : k]
            if start - 1 >= len(head) and (turn, new) != self._short_render(conversation, wider, k):
                return "its text depends on more than the message before the reply"
        except ValueError as error:  # ChatFormatError included: the template refused the short conversation
            return str(error)
        return _NewText(turn, new, "incremental")

    def _short_render(self, conversation: Conversation, context: tuple[Message, ...], k: int) -> tuple[str, str]:
        """(reply turn text, text after it) rendered after ``context`` instead of the whole history."""
        template, messages, tools = self.template, conversation.messages, conversation.tools
        before = template.render(context, tools, generation_prompt=True)
        through = template.render(context + messages[k : k + 1], tools, generation_prompt=False)
        full = template.render(context + messages[k:], tools, generation_prompt=True)
        if not through.startswith(before) or not full.startswith(through):
            raise ValueError("a shortened conversation does not render as a prefix")
        return through[len(before) :], full[len(through) :]

    def _from_scratch(self, conversation: Conversation, reason: str) -> PromptPlan:
        text = self.template.render_prompt(conversation)
        ids = self.template.encode(text)
        return PromptPlan(conversation, TokenSeq.of(ids), None, 0, len(ids), f"new branch: {reason}", text)

    def commit(self, plan: PromptPlan, call_id: str, response_ids: list[int], assistant: Message, *, stopped: bool) -> None:
        """Remember a completed call (one the client received) so that later requests can extend it."""
        node = CallNode(
            call_id, plan.conversation, plan.tokens.extend(response_ids, label=call_id), len(plan.tokens),
            assistant, stopped,
        )
        self._calls[call_id] = node
        self._index.setdefault(node.key, []).append(node)
        while len(self._calls) > self.max_calls:
            _, old = self._calls.popitem(last=False)
            bucket = self._index[old.key]
            bucket.remove(old)
            if not bucket:
                del self._index[old.key]

    def __len__(self) -> int:
        return len(self._calls)


def shape_key(conversation: Conversation) -> tuple:
    """What incremental rendering's checks are kept per: the system prompt and the tools' names."""
    first = conversation.messages[0]
    return (first if first.role == "system" else None, tuple(tool.name for tool in conversation.tools))

