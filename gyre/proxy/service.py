"""The API-independent call path: conversation -> prompt ids -> routed generation -> parsed turn -> record.

Each API module (OpenAI chat/completions/responses, Anthropic messages) only translates its wire format
to a ``Conversation`` + ``GenOptions`` and the ``CallResult`` back. A call is split in two steps so that
all validation (400s) happens before a streaming response starts: ``prepare_*`` (synchronous: role,
prompt plan, token budget) and ``run`` (route, generate, record, remember for later extensions).

Token budget (``max_tokens``): a request asking for more than ``proxy.max_output_tokens`` (an absurd
budget) is refused (400). Otherwise the call generates at most the smallest of: the request's budget,
the room left in the context after its prompt, and ``proxy.max_tokens_cap`` (off by default; for
evaluation on slow hardware); finish is ``length`` if reached and the record's ``meta.max_tokens`` says
which bound applied. Harnesses ask for budgets sized for their own vendor's models (Claude Code asks
for 32-64k), so a budget above the served model's window is served, not refused. A prompt that leaves
no room is refused with "prompt is too long" (the phrase harnesses such as Claude Code react to by
compacting).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gyre.chat import (
    AgentHeaderError,
    AgentTag,
    ChatFormatError,
    ChatTemplate,
    Conversation,
    Message,
    PromptPlan,
    ToolCall,
    parse_output,
)
from gyre.chat.template import COUNT_CHUNK_CHARS
from gyre.protocol import AGENT_ROLES, CallRecord
from gyre.proxy.config import ProxyConfig
from gyre.proxy.errors import ProxyError, bad_request
from gyre.proxy.executions import ExecutionRegistry, OpenExecution
from gyre.proxy.recorder import RecordWriter
from gyre.proxy.router import OverloadedError, Router
from gyre.rollout.base import PromptTooLongError, SamplingError, SamplingParams

COUNT_FIRST_CHARS_PER_TOKEN = 2  # messages longer than this many characters per window token are counted first


@dataclass
class GenOptions:
    """Generation settings common to every API, already type-checked by the API layer."""

    api: str
    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    parse_tools: bool = True
    tool_id_prefix: str = "call_"
    max_tokens_param: str = "max_tokens"


@dataclass
class PreparedCall:
    execution: OpenExecution
    call_id: str
    options: GenOptions
    tag: AgentTag
    prompt_ids: Sequence[int]  # a TokenSeq for chat calls (shares the parent call's tokens), else a list
    sampling: SamplingParams
    plan: PromptPlan | None  # None for raw-text completions (nothing to extend)
    budget: dict[str, Any]
    received: float = field(default_factory=time.perf_counter)

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def session_id(self) -> str:
        return f"{self.execution.execution_id}/{self.tag.lineage}"


@dataclass
class CallResult:
    call_id: str
    record: CallRecord
    text: str  # the generated text (stop token and anything after a stop string removed)
    assistant: Message  # the parsed turn as returned to the client
    finish: str  # stop | length | tool_calls | stop_sequence
    stop_sequence: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


class Proxy:
    """Executions, their calls and their records, over a router of rollout cells."""

    def __init__(self, template: ChatTemplate, router: Router, config: ProxyConfig, recorder: RecordWriter | None = None) -> None:
        self.template = template
        self.router = router
        self.config = config
        router.parking = config.parking  # proxy.parking: when the router parks sessions waiting on tools
        self.recorder = recorder or RecordWriter(
            config.run_dir, fsync=config.fsync, fsync_before_response=config.fsync_before_response,
            fsync_interval_s=config.fsync_interval_s,
        )
        self.executions = ExecutionRegistry(
            template, history_calls=config.history_calls, summary_pattern=config.summary_pattern
        )

    # ------------------------------------------------------------------ executions and records

    def open_execution(self, execution_id: str) -> str:
        """Start accepting calls for ``execution_id``; returns the API key its harness must use."""
        return self.executions.open(execution_id)

    def close_execution(self, key: str) -> None:
        """End an execution: its key stops working (401) and its cell placement is released."""
        execution = self.executions.close(key)
        self.router.release(execution.execution_id)

    def records(self, execution_id: str) -> list[CallRecord]:
        """Every call of ``execution_id`` recorded so far (read back from its durable log)."""
        return self.recorder.read(execution_id)

    def close(self) -> None:
        self.recorder.close()

    def context_window(self) -> int | None:
        if self.config.context_window is not None:
            return self.config.context_window
        windows = [getattr(cell.engine, "max_context", None) for cell in self.router.cells.values()]
        windows = [w for w in windows if isinstance(w, int)]
        return min(windows) if windows else None

    # ------------------------------------------------------------------ step 1: prepare

    def prepare_chat(self, execution: OpenExecution, conversation: Conversation, options: GenOptions, agent_header: str | None) -> PreparedCall:
        self.check_prompt_size(conversation)
        try:
            tag = execution.roles.classify(conversation, agent_header)
        except AgentHeaderError as error:
            raise bad_request(str(error), "x-gyre-agent") from error
        try:
            plan = execution.builder.plan(conversation)
        except ChatFormatError as error:
            raise bad_request(str(error), "messages") from error
        return self._prepare(execution, options, tag, plan.tokens, plan)

    def prepare_completion(self, execution: OpenExecution, prompt_ids: list[int], options: GenOptions, agent_header: str | None) -> PreparedCall:
        role = (agent_header or "main").strip().lower()
        if role not in AGENT_ROLES:
            raise bad_request(f"header x-gyre-agent: {agent_header!r} is not one of {AGENT_ROLES}", "x-gyre-agent")
        if not prompt_ids:
            raise bad_request("prompt: must not be empty", "prompt")
        return self._prepare(execution, options, AgentTag(role, 0), prompt_ids, None)

    def charge_count_tokens(self, execution: OpenExecution) -> None:
        """Count one count_tokens request against the execution's budget (429 once it is spent): they are
        not recorded calls, so ``max_calls`` does not bound them."""
        limit = self.config.max_count_tokens_calls
        if execution.count_tokens_calls >= limit:
            raise ProxyError(
                "rate_limited",
                f"execution {execution.execution_id} has made its {limit} count_tokens requests "
                "(proxy.max_count_tokens_calls)",
            )
        execution.count_tokens_calls += 1

    def count_tokens(self, conversation: Conversation) -> int:
        """Tokens of ``conversation``'s prompt (a 400 when it could not fit the context window)."""
        self.check_prompt_size(conversation)
        try:
            return self.template.count_tokens(conversation)
        except ChatFormatError as error:
            raise bad_request(str(error), "messages") from error

    def check_prompt_size(self, conversation: Conversation) -> None:
        """Refuse a conversation whose messages alone could not fit the context window, before tokenising
        all of it (a tokenizer takes ~100-200 bytes of memory per token, and seconds per megabyte): past
        ``window * template.max_token_chars`` characters it cannot fit at all; past ``window *
        COUNT_FIRST_CHARS_PER_TOKEN`` its messages are counted in bounded chunks first."""
        window, per_token = self.context_window(), self.template.max_token_chars
        if window is None or per_token is None:
            return
        texts = [text for m in conversation.messages for text in (m.content, m.reasoning) if text]
        texts += [call.arguments for m in conversation.messages for call in m.tool_calls]
        chars = sum(map(len, texts))
        if chars > window * per_token:
            raise bad_request(
                f"prompt is too long: its messages hold {chars} characters, more than a {window}-token context "
                f"window can hold (at most {per_token} characters per token)",
                "messages",
            )
        if chars <= window * COUNT_FIRST_CHARS_PER_TOKEN:
            return
        counted = 0
        slack = len(texts) + chars // COUNT_CHUNK_CHARS  # a chunk boundary may split one token in two
        for text in texts:
            counted += self.template.count_text_tokens(text, stop_after=window + slack - counted)
            if counted > window + slack:
                raise bad_request(
                    f"prompt is too long: its messages are more than {window} tokens (counted {counted} in "
                    f"chunks), the context window is {window}",
                    "messages",
                )

    def _prepare(
        self, execution: OpenExecution, options: GenOptions, tag: AgentTag, prompt_ids: Sequence[int],
        plan: PromptPlan | None,
    ) -> PreparedCall:
        budget = self._budget(options, len(prompt_ids))
        try:
            sampling = SamplingParams(
                temperature=self.config.default_temperature if options.temperature is None else options.temperature,
                top_p=1.0 if options.top_p is None else options.top_p,
                max_new_tokens=budget["effective"],
                stop_token_ids=self.template.stop_token_ids,
                seed=options.seed,
            )
        except SamplingError as error:
            raise bad_request(str(error)) from error
        return PreparedCall(execution, execution.next_call_id(), options, tag, prompt_ids, sampling, plan, budget)

    def _budget(self, options: GenOptions, prompt_tokens: int) -> dict[str, Any]:
        window = self.context_window()
        param = options.max_tokens_param
        requested = options.max_tokens
        if window is not None and prompt_tokens >= window:
            raise bad_request(
                f"prompt is too long: {prompt_tokens} tokens > {window - 1} maximum (the context window is {window} tokens)",
                "messages",
            )
        limit = self.config.max_output_tokens
        if requested is not None and requested > limit:
            raise bad_request(f"{param}: {requested} is more than this proxy serves per call ({limit}, proxy.max_output_tokens)", param)
        room = window - prompt_tokens if window is not None else None
        wanted = requested if requested is not None else self.config.default_max_tokens
        limits = {"requested": wanted, "context": room, "cap": self.config.max_tokens_cap}
        present = {k: v for k, v in limits.items() if v is not None}
        if not present:
            raise bad_request(f"{param}: required (the proxy has no context window to default to)", param)
        effective = min(present.values())
        bound_by = min(present, key=lambda k: present[k])
        return {"requested": requested, "effective": int(effective), "bound_by": bound_by}

    # ------------------------------------------------------------------ step 2: run

    async def admit(self, call: PreparedCall) -> None:
        """Wait for room on the call's cell (bounded); a 429/529 ``ProxyError`` if none came."""
        try:
            await self.router.admit(call.execution.execution_id)
        except OverloadedError as error:
            raise ProxyError("overloaded", str(error), retry_after_s=error.retry_after_s) from error

    async def run(self, call: PreparedCall) -> CallResult:
        """Generate, parse, record durably, and remember the turn for later extensions.

        ``execution.inflight`` covers the whole call, record included: once it is 0 every call of the
        execution has been recorded (``execution.calls`` counts them) or has failed.
        """
        execution = call.execution
        execution.inflight += 1
        try:
            return await self._run(call)
        finally:
            execution.inflight -= 1

    async def _run(self, call: PreparedCall) -> CallResult:
        execution = call.execution
        try:
            routed = await self.router.generate(execution.execution_id, call.session_id, call.prompt_ids, call.sampling)
        except OverloadedError as error:
            raise ProxyError("overloaded", str(error), retry_after_s=error.retry_after_s) from error
        except PromptTooLongError as error:
            raise bad_request(f"prompt is too long: {error}", "messages") from error
        except SamplingError as error:
            raise bad_request(str(error)) from error
        generation = routed.generation
        if generation.finish_reason == "abort":
            raise ProxyError("unavailable", "the rollout engine aborted the call (cell stopped serving); retry", retry_after_s=self.config.retry_after_s)
        ids, logprobs = list(generation.response_ids), list(generation.logprobs)
        stopped = generation.finish_reason == "stop"
        text_ids = ids[:-1] if stopped and ids else ids
        text = self.template.decode(text_ids)
        stop_sequence = None
        cut = self._cut_at_stop(text_ids, text, call.options.stop)
        if cut is not None:
            keep, text, stop_sequence = cut
            ids, logprobs, stopped = ids[:keep], logprobs[:keep], False
        assistant, finish = self._turn(call, text, stop_sequence, generation.finish_reason)
        done = time.perf_counter()
        record = CallRecord(
            execution_id=execution.execution_id,
            call_id=call.call_id,
            agent=call.tag.role,
            prompt_ids=call.prompt_ids,
            response_ids=ids,
            response_logprobs=logprobs,
            weight_version=generation.weight_version,
            cell_id=routed.cell_id,
            finish_reason="stop" if stop_sequence else generation.finish_reason,
            timings={
                **{k: float(v) for k, v in generation.timings.items()},
                "proxy_queue_s": routed.queue_s,
                "proxy_total_s": done - call.received,
                "completed_at": time.time(),
            },
            meta=self._meta(call, routed, generation.cached_tokens, stop_sequence, assistant),
        )
        try:
            await self.recorder.write(record)
        except (OSError, TypeError, ValueError) as error:
            raise ProxyError("internal", f"could not record the call durably: {error}") from error
        execution.calls += 1
        if call.plan is not None:
            ends_turn = stopped and bool(ids) and ids[-1] == self.template.eos_token_id
            async with execution.chat_lock:  # a request of this execution may be planning on a worker thread
                execution.builder.commit(call.plan, call.call_id, ids, assistant, stopped=ends_turn)
        return CallResult(
            call.call_id, record, text, assistant, finish, stop_sequence, len(call.prompt_ids), len(ids), generation.cached_tokens
        )

    def _turn(self, call: PreparedCall, text: str, stop_sequence: str | None, engine_finish: str) -> tuple[Message, str]:
        """The assistant message the client gets (parsed, tool calls given ids) and the finish reason."""
        if call.plan is None:
            assistant = Message("assistant", text)
            calls: tuple[ToolCall, ...] = ()
        else:
            parsed = parse_output(
                text,
                parse_tools=call.options.parse_tools and bool(call.plan.conversation.tools),
                think_opened=call.plan.rendered.rstrip().endswith("<think>"),
            )
            calls = tuple(
                ToolCall(f"{call.options.tool_id_prefix}{secrets.token_hex(12)}", c.name, c.arguments) for c in parsed.tool_calls
            )
            assistant = Message("assistant", parsed.content, parsed.reasoning, calls)
        if stop_sequence is not None:
            finish = "stop_sequence"
        elif engine_finish == "length":
            finish = "length"
        else:
            finish = "tool_calls" if calls else "stop"
        return assistant, finish

    def _meta(self, call: PreparedCall, routed: Any, cached: int, stop_sequence: str | None, assistant: Message) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "api": call.options.api,
            "model": call.options.model,
            "lineage": call.tag.lineage,
            "session_id": routed.session_id,
            "cached_tokens": cached,
            "max_tokens": call.budget,
            "tool_calls": len(assistant.tool_calls),
        }
        if call.plan is not None:
            meta.update(
                parent_call_id=call.plan.parent_call_id,
                reused_tokens=call.plan.reused_tokens,
                new_tokens=call.plan.new_tokens,
                branch=call.plan.reason,
                rendering=call.plan.rendering,
            )
            if call.plan.rendering_note:
                meta["rendering_note"] = call.plan.rendering_note
        if stop_sequence is not None:
            meta["stop_sequence"] = stop_sequence
        if routed.reroutes:
            meta["reroutes"] = routed.reroutes
        return meta

    def _cut_at_stop(self, ids: list[int], text: str, stops: tuple[str, ...]) -> tuple[int, str, str] | None:
        """(tokens to keep, text before the stop string, the stop string) for the first stop string found.

        The kept tokens run through the token that completes the stop string: those are what the policy
        sampled up to the stop; anything after is discarded (and not recorded) as the client never sees it.
        """
        found = [(text.find(stop), stop) for stop in stops if stop in text]
        if not found:
            return None
        position, stop = min(found)
        needed = position + len(stop)
        low, high = 1, len(ids)
        while low < high:  # smallest prefix whose text covers the stop string
            middle = (low + high) // 2
            if len(self.template.decode(ids[:middle])) >= needed:
                high = middle
            else:
                low = middle + 1
        return low, text[:position], stop
