"""Rendering a conversation with the model's own chat template, and the tokenizer calls around it.

The proxy never writes prompt text itself: the template shipped with the checkpoint decides the format,
so what the policy sees in training is exactly what it saw when it acted.
"""

from __future__ import annotations

from typing import Any

from gyre.chat.messages import Conversation, Message, Tool

LONG_TEXT_CHARS = 16384  # texts this long are encoded with encode_batch, which releases the GIL
COUNT_CHUNK_CHARS = 65536  # `count_text_tokens` encodes this much at a time (a bounded amount of memory)


class ChatFormatError(ValueError):
    """The chat template refused the conversation (e.g. a misplaced system message); the message says why."""


def compiled_template(source: str) -> Any:
    """transformers' compiled (sandboxed, cached) jinja template for ``source``, or None if unavailable."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:
        return None
    return _compile_jinja_template(source)


class ChatTemplate:
    """A tokenizer plus its chat template: text rendering, encoding, decoding and the end-of-turn token."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat_template; the proxy needs one to render conversations")
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no eos_token; the proxy needs it to end a generated turn")
        self.tokenizer = tokenizer
        # The Rust tokenizer behind a fast HF tokenizer: same ids, a third less overhead per call.
        self._fast = getattr(tokenizer, "_tokenizer", None)
        self.eos_token_id: int = int(tokenizer.eos_token_id)
        self.eos_text: str = str(tokenizer.eos_token)
        self._compiled = compiled_template(tokenizer.chat_template)
        self._variables = dict(tokenizer.special_tokens_map)
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        # No token covers more characters than its longest vocabulary entry: a text longer than the context
        # window times this cannot fit, and is refused without tokenising it (gyre.proxy.service).
        self.max_token_chars: int | None = max(map(len, vocab), default=0) or None

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Tokens that end an assistant turn: the tokenizer's end-of-turn token only (see ``history``,
        which relies on a stopped response ending with exactly this token)."""
        return (self.eos_token_id,)

    def render(
        self, messages: tuple[Message, ...] | list[Message], tools: tuple[Tool, ...] = (), *, generation_prompt: bool
    ) -> str:
        """The template's text for ``messages`` (+ ``tools``), optionally opening the assistant's turn.

        Renders the compiled template directly with what ``apply_chat_template`` would pass it (the
        tokenizer's special tokens; reasoning also under the alias ``thinking``): our messages are plain
        dicts of strings already, and skipping that wrapper's defensive copies halves the cost per call.
        """
        data = [message.to_template() for message in messages]
        for item in data:
            if "reasoning_content" in item:
                item.setdefault("thinking", item["reasoning_content"])
        try:
            if self._compiled is None:
                text = self.tokenizer.apply_chat_template(
                    data, tools=[tool.to_template() for tool in tools] or None, tokenize=False, add_generation_prompt=generation_prompt
                )
            else:
                text = self._compiled.render(
                    messages=data,
                    tools=[tool.to_template() for tool in tools] or None,
                    documents=None,
                    add_generation_prompt=generation_prompt,
                    **self._variables,
                )
        except Exception as error:  # jinja raises TemplateError (and raise_exception's) with a useful text
            raise ChatFormatError(f"the chat template rejected the conversation: {error}") from error
        if not isinstance(text, str):
            raise ChatFormatError(f"the chat template returned {type(text).__name__}, expected text")
        return text

    def render_prompt(self, conversation: Conversation) -> str:
        return self.render(conversation.messages, conversation.tools, generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        """Token IDs of ``text``; special-token markers in it (``<|im_start|>``) become their single IDs."""
        if self._fast is not None:
            if len(text) >= LONG_TEXT_CHARS:  # same ids; the batch call lets other threads run meanwhile
                return self._fast.encode_batch([text], add_special_tokens=False)[0].ids
            return self._fast.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def count_text_tokens(self, text: str, stop_after: int | None = None) -> int:
        """About how many tokens ``text`` is, counted in chunks (memory bounded by one chunk's encoding,
        which costs the tokenizer ~100-200 bytes per token), stopping once past ``stop_after``. A chunk
        boundary can split a token in two, so the count may exceed the exact one by one per chunk."""
        total = 0
        for start in range(0, len(text), COUNT_CHUNK_CHARS):
            total += len(self.encode(text[start : start + COUNT_CHUNK_CHARS]))
            if stop_after is not None and total > stop_after:
                break
        return total

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` with special tokens kept: tool-call and think markers are content to the parser."""
        if self._fast is not None:
            return self._fast.decode(ids, skip_special_tokens=False)
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def decode_response(self, ids: list[int]) -> str:
        """Text of a generated turn, without the end-of-turn token that stopped it."""
        if ids and ids[-1] == self.eos_token_id:
            ids = ids[:-1]
        return self.decode(ids)

    def count_tokens(self, conversation: Conversation) -> int:
        return len(self.encode(self.render_prompt(conversation)))
