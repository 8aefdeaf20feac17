"""OpenAI ``POST /v1/completions``: raw text (or token ids) in, text out, no chat template.

A prompt given as token ids is used as is (exact); a text prompt is tokenized without special-token
additions. These calls have no conversation to extend, so each one is its own branch; their role is
``main`` unless ``x-gyre-agent`` says otherwise.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from gyre.proxy.errors import ProxyError, bad_request
from gyre.proxy.executions import OpenExecution
from gyre.proxy.openai_chat import (
    OPENAI_FINISH,
    refuse_unsupported,
    sampling_options,
    usage,
)
from gyre.proxy.service import CallResult, PreparedCall, Proxy
from gyre.proxy.sse import chunks, data_event, run_streaming
from gyre.proxy.validate import get_bool, get_dict, get_int, type_name

DEFAULT_MAX_TOKENS = 16  # the OpenAI completions default


def prompt_ids(proxy: Proxy, prompt: Any) -> list[int]:
    """Token ids of ``prompt``: a string, an array of token ids, or a one-element array of either."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return proxy.template.encode(prompt)
    if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        vocab = len(proxy.template.tokenizer)
        bad = next((t for t in prompt if not 0 <= t < vocab), None)
        if bad is not None:
            raise bad_request(f"prompt: token id {bad} is outside the vocabulary [0, {vocab})", "prompt")
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) > 1:
        raise bad_request("prompt: only one prompt per request is supported; send separate requests", "prompt")
    raise bad_request(f"prompt: expected a string or an array of token ids, got {type_name(prompt)}", "prompt")


class Completions:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def prepare(self, execution: OpenExecution, body: dict[str, Any], agent: str | None) -> tuple[PreparedCall, dict[str, Any]]:
        refuse_unsupported(body)
        options = sampling_options(body, "openai.completions", max_tokens_keys=("max_tokens",))
        if options.max_tokens is None:
            options.max_tokens = DEFAULT_MAX_TOKENS
        if "prompt" not in body:
            raise bad_request("prompt: field required", "prompt")
        if get_bool(body, "echo"):
            raise bad_request("echo: not supported", "echo")
        if body.get("suffix"):
            raise bad_request("suffix: not supported (no fill-in-the-middle)", "suffix")
        logprobs = get_int(body, "logprobs", minimum=0)
        if logprobs:
            raise bad_request("logprobs: only 0 is supported (the sampled tokens' log-probs, no alternatives)", "logprobs")
        ids = prompt_ids(self.proxy, body["prompt"])
        stream_options = get_dict(body, "stream_options") or {}
        flags = {
            "stream": get_bool(body, "stream"),
            "include_usage": get_bool(stream_options, "include_usage", path="stream_options."),
            "logprobs": logprobs is not None,
        }
        return self.proxy.prepare_completion(execution, ids, options, agent), flags

    def _logprobs(self, result: CallResult) -> dict[str, Any]:
        decode = self.proxy.template.decode
        ids = result.record.response_ids[: result.completion_tokens]
        tokens = [decode([t]) for t in ids]
        offsets, position = [], 0
        for token in tokens:
            offsets.append(position)
            position += len(token)
        return {"tokens": tokens, "token_logprobs": list(result.record.response_logprobs), "top_logprobs": None, "text_offset": offsets}

    def response(self, call: PreparedCall, result: CallResult, flags: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"cmpl-{result.call_id.rsplit(':', 1)[-1]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": call.options.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "text": result.text,
                    "index": 0,
                    "logprobs": self._logprobs(result) if flags["logprobs"] else None,
                    "finish_reason": OPENAI_FINISH[result.finish],
                }
            ],
            "usage": usage(result),
        }

    async def stream(self, call: PreparedCall, flags: dict[str, Any]) -> AsyncIterator[bytes]:
        base = {"id": f"cmpl-{call.call_id.rsplit(':', 1)[-1]}", "object": "text_completion", "created": int(time.time()), "model": call.options.model}
        async for item in run_streaming(self.proxy, call, b": keep-alive\n\n"):
            if isinstance(item, bytes):
                yield item
                continue
            if isinstance(item, ProxyError):
                yield data_event(item.body("openai"))
                return
            result = item
        for piece in chunks(result.text, self.proxy.config.stream_chunk_chars):
            yield data_event({**base, "choices": [{"text": piece, "index": 0, "logprobs": None, "finish_reason": None}]})
        logprobs = self._logprobs(result) if flags["logprobs"] else None
        yield data_event({**base, "choices": [{"text": "", "index": 0, "logprobs": logprobs, "finish_reason": OPENAI_FINISH[result.finish]}]})
        if flags["include_usage"]:
            yield data_event({**base, "choices": [], "usage": usage(result)})
        yield b"data: [DONE]\n\n"
