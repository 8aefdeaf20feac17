"""``HFEngine``: the embedded continuous-batching engine over a transformers model (CPU default, GPU too).

Why not transformers' continuous-batching manager (``transformers.generation.continuous_batching``,
paged attention)? In the installed release (5.24) it serves one-shot requests well but lacks what a
rollout cell needs: its prefix sharing is hash-matched full pages with no notion of a session that
owns its cache between calls, so there is nothing to export or import and no per-session eviction;
``do_sample`` and the seed are per manager, not per request; and its log-probs are taken after the
logits processors, i.e. after top-p truncation, which is not what the trainer recomputes. Session
reuse and export/import would have meant reaching into its block allocator. So this engine keeps a
plain per-session KV cache (``list[(key, value)]`` per layer, the ``KVState`` layout) and runs one
batched forward per decode step in which attention runs per session over its own cache (see
``hf_runner``: no padding, no copying caches each step): exact, testable against ``generate`` token
for token, and small.

Threading: the engine owns a dedicated thread (started on first use) that runs the scheduler and all
model compute; every public coroutine posts a command to it and awaits a future. The event loop that
calls the engine is never blocked by torch, calls may come from any event loop (or several), and all
engine state is touched by that one thread only, so there are no locks around it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from gyre.rollout.base import (
    EngineAsleepError,
    Generation,
    InvalidTokenError,
    KVState,
    PromptTooLongError,
    SamplingParams,
    common_prefix_length,
)
from gyre.rollout.hf_runner import HFRunner, RowCache
from gyre.rollout.kv_store import LayerKV, SessionKV, SessionStore
from gyre.rollout.metrics import EngineCounters, ThroughputMeter
from gyre.rollout.parked_kv import ParkedStore, kv_bytes, on_device
from gyre.rollout.sampling import RowSampler, check_token_ids, sample_rows

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Call:
    """One ``generate`` call from submission to finish. Touched by the engine thread only."""

    session_id: str
    prompt: list[int]  # as the caller gave it until the engine thread checks it (``_enqueue``)
    sampling: SamplingParams
    sampler: RowSampler
    stop_ids: frozenset[int]
    future: concurrent.futures.Future
    submitted: float
    tokens: list[int] = field(default_factory=list)  # prompt + response so far
    response: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    kv: RowCache | None = None  # covers tokens[: kv_len]
    kv_version: int = 0  # oldest weight version in the cache
    cached_tokens: int = 0
    prefilled_tokens: int = 0
    park_recompute_left: int = 0  # prompt tokens still to recompute because the session's parked cache was dropped
    version_first: int | None = None
    admitted: float | None = None
    first_token: float | None = None

    @property
    def kv_len(self) -> int:
        return self.kv.length if self.kv is not None else 0


class HFEngine:
    """Continuous-batching rollout engine over a transformers causal LM, with per-session KV caches.

    Behaviour log-probs: each reported log-prob is that of the sampled token under
    ``log_softmax(logits / T)`` with ``T = temperature`` (``T = 1`` when greedy), taken *before* top-p
    truncation. The trainer recomputes exactly ``log_softmax(logits / T)``, so the two agree (1e-4 in
    fp32) whatever ``top_p`` was.

    Scheduling: each iteration admits waiting calls (up to ``max_batch_size`` running, one call per
    session at a time: a second call on a busy session waits for the first), prefills new calls one by
    one (no padding; long prompts in chunks so decodes keep flowing), then runs one batched decode step
    for every running call whose cache is complete. New calls therefore join the decode batch at the
    next step. Calls stop at the model's EOS or a ``stop_token_ids`` token (included in the response,
    finish ``stop``), at ``max_new_tokens`` or the context end (``length``), or on ``abort``.

    Session cache: when a call ends its session keeps the KV of the tokens it fed (prompt + response
    minus the last sampled token). The next call on the session reuses the longest common prefix of those
    tokens and its prompt and prefills only the rest; ``stats()["prefix_hit_rate"]`` counts it. Idle
    caches and running calls together stay within ``max_cached_tokens`` at every step: least-recently-used
    idle sessions are evicted first; a new call waits while running calls fill the budget; and when
    running calls grow past it, the most recently admitted ones are preempted (their cache dropped, the
    call requeued first in line to recompute it). A call's context is therefore at most
    ``max_cached_tokens`` too: ``max_context`` is the smaller of the model's window, the ``max_context``
    argument and the budget, and a longer prompt is refused with ``PromptTooLongError``.
    ``stats()["recomputed_tokens"]`` counts cached tokens fed again after an eviction or preemption.

    Weights: ``load_weights`` runs between steps and keeps sessions; caches made with older weights are
    recomputed on their next use (running calls recompute their prefix at the next step) unless
    ``reuse_stale_kv``. A load is checked whole before any of it is copied, so the engine holds the whole
    update while loading (a sync's stream of buckets included; vLLM's adapter holds one bucket). ``Generation.weight_version`` is the version that sampled the last token; if the
    weights changed during the call, ``timings["weight_version_first"]`` holds the version of the first. ``sleep()`` ends running and waiting calls with ``abort`` (their tokens so far
    are returned), drops every cache and frees the weights; calls made while asleep raise
    ``EngineAsleepError`` at once rather than wait, so a router can send them elsewhere. ``wake()``
    restores. ``close()`` stops the engine thread; it also aborts what is in flight.

    Parking: ``park(session)`` takes an idle session's cache out of ``max_cached_tokens`` into host memory
    (at most ``max_parked_bytes``; see ``parked_kv``), so its budget admits other calls while the session's
    agent runs tools. The session's next call takes the cache back when it is admitted (only the prefix it
    reuses is moved), or, if the cache was dropped to keep host memory bounded, recomputes it: outputs are
    the same either way. Sleep and close drop parked caches with the rest.
    """

    kind = "hf"
    #: The longest piece of a prompt fed in one forward pass (bounds activation memory).
    prefill_chunk_tokens = 8192
    #: Prefill work per scheduler iteration; the rest waits a step so running decodes keep going.
    prefill_tokens_per_step = 8192

    def __init__(
        self,
        model_path: str = "tiny",
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 32,
        max_cached_tokens: int = 200_000,
        reuse_stale_kv: bool = False,
        engine_id: str = "hf-0",
        max_context: int | None = None,
        max_parked_bytes: int = 4 << 30,
    ) -> None:
        from gyre.models import load_model

        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model_path = model_path
        self.device = device
        self.dtype = dtype
        self.max_batch_size = max_batch_size
        self.reuse_stale_kv = reuse_stale_kv
        self.engine_id = engine_id
        self.weight_version: int = 0

        if max_cached_tokens < 2:
            raise ValueError(
                f"max_cached_tokens must be >= 2 (a running call's own KV cache counts against it), got {max_cached_tokens}"
            )
        model = load_model(model_path, dtype=dtype, device=device, attn_implementation="sdpa").eval()
        self._runner = HFRunner(model)
        model_context = self._runner.max_positions
        if max_context is not None and not 2 <= max_context <= model_context:
            raise ValueError(f"max_context must be in [2, {model_context}] (the model's positions), got {max_context}")
        if max_context is not None and max_context > max_cached_tokens:
            raise ValueError(
                f"max_context={max_context} is more than max_cached_tokens={max_cached_tokens}: a call's KV cache "
                "must fit the cache budget"
            )
        self.max_context: int = min(max_context or model_context, max_cached_tokens)
        self._eos_ids = frozenset(_eos_ids(model))

        self._store = SessionStore(max_cached_tokens)
        self._parked = ParkedStore(max_parked_bytes)
        self._waiting: deque[_Call] = deque()
        self._running: list[_Call] = []
        self._counters = EngineCounters()
        self._meter = ThroughputMeter()

        self._commands: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self._asleep = False
        self._sleep_level = 0
        self._host_weights: dict[str, torch.Tensor] | None = None
        self._needs_weights = False  # woke from sleep(level=2) after weights had been updated

    # ------------------------------------------------------------------ public protocol

    @property
    def vocab_size(self) -> int:
        return self._runner.vocab_size

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """Generate a response to ``prompt_ids`` on ``session_id``; see the class docstring."""
        call = self._new_call(session_id, prompt_ids, sampling)
        queued = self._post(lambda: self._enqueue(call))
        # If the engine closes before it reads the command, the command fails: so does the call.
        queued.add_done_callback(lambda done: done.exception() and _resolve(call.future, error=done.exception()))
        try:
            return await asyncio.wrap_future(call.future)
        except asyncio.CancelledError:
            # The caller went away (e.g. an HTTP client disconnected): stop spending compute on it.
            try:
                self._post(lambda: self._abort_calls(lambda c: c is call))
            except EngineAsleepError:
                pass
            raise

    async def abort(self, session_id: str) -> bool:
        """End the session's in-flight (or queued) calls with finish_reason ``abort``, keeping the tokens
        generated so far. True if there was one."""
        return await self._command(lambda: self._abort_calls(lambda c: c.session_id == session_id) > 0)

    async def park(self, session_id: str) -> bool:
        """Take the session's idle cache out of the KV budget: to host memory, or dropped (recomputed by its
        next call) when ``max_parked_bytes`` cannot hold it. True if this freed budget; False if the session
        has a call running or queued (its cache is in use: park it after the call), holds no cache in the
        budget (unknown, evicted or already parked), or the engine is asleep. Its next ``generate`` restores
        it without the caller doing anything."""
        return await self._command(lambda: self._park(session_id))

    async def end_session(self, session_id: str) -> None:
        """The session's execution ended: free its cache, in the budget or parked on host (else it would
        hold memory until evicted by newer sessions)."""
        await self._command(lambda: self._end_session(session_id))

    async def export_session(self, session_id: str) -> KVState | None:
        """A CPU copy of the session's idle (or parked) cache (None if it has none); the engine keeps its own."""
        return await self._command(lambda: self._export(session_id))

    async def import_session(self, session_id: str, state: KVState) -> None:
        """Adopt another engine's cache for ``session_id``. It is verified on the session's next call
        (its tokens must be a prefix of the prompt and its weight version current); if not, the prompt
        is recomputed and ``kv_import_fallbacks`` counts it. A state without tensors (e.g. from vLLM)
        counts as a fallback at once. Wrong tensor shapes raise ``ValueError``."""
        await self._command(lambda: self._import(session_id, state))

    async def sleep(self, level: int = 1) -> None:
        """Free the weights and every cache. Level 1 keeps a host-memory copy of the weights (on CPU that
        copy is the weights themselves: only caches are freed); level 2 discards them and ``wake()``
        reloads the checkpoint (then, if weights had been loaded since, calls raise until
        ``load_weights``)."""
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 or 2, got {level}")
        await self._command(lambda: self._sleep(level))

    async def wake(self) -> None:
        await self._command(self._wake)

    async def load_weights(self, weights: Iterable[tuple[str, Any]], version: int) -> None:
        """Copy ``(name, tensor)`` pairs (HF parameter names; a subset is fine) into the model between two
        steps and report ``version`` from now on. Names and shapes are all checked before anything is
        copied, so a bad update leaves the engine unchanged."""
        await self._command(lambda: self._load_weights(weights, version))

    async def close(self) -> None:
        """Abort what is in flight, drop caches and stop the engine thread. Idempotent."""
        self._closed = True
        with self._thread_lock:
            thread = self._thread
        if thread is None:
            return
        if thread.is_alive():
            future: concurrent.futures.Future = concurrent.futures.Future()
            self._commands.put((self._stop, future))
            await asyncio.wrap_future(future)
            await asyncio.to_thread(thread.join)

    def stats(self) -> dict[str, float]:
        """Engine metrics as a flat dict of floats (safe to call from any thread)."""
        counters = self._counters
        running = list(self._running)
        return {
            "running": float(len(running)),
            "waiting": float(len(self._waiting)),
            "cached_sessions": float(len(self._store)),
            "cached_tokens": float(self._store.total_tokens + sum(c.kv_len for c in running)),
            "tokens_per_s": self._meter.rate(),
            "prefix_hit_rate": counters.prefix_hit_rate,
            "kv_import_fallbacks": float(counters.kv_import_fallbacks),
            "prompt_tokens": float(counters.prompt_tokens),
            "prefix_hit_tokens": float(counters.prefix_hit_tokens),
            "generated_tokens": float(counters.generated_tokens),
            "evictions": float(self._store.evictions),
            "stale_recomputes": float(counters.stale_recomputes),
            "recomputed_tokens": float(counters.recomputed_tokens),
            "preemptions": float(counters.preemptions),
            "calls_finished": float(counters.calls_finished),
            "calls_aborted": float(counters.calls_aborted),
            "parked_sessions": float(len(self._parked)),
            "parked_tokens": float(self._parked.total_tokens),
            "parked_bytes": float(self._parked.total_bytes),
            "parks": float(counters.parks),
            "parked_caches_dropped": float(self._parked.drops),
            "park_bytes_to_host": float(counters.park_bytes_to_host),
            "restores": float(counters.restores),
            "restore_bytes_from_host": float(counters.restore_bytes_from_host),
            "restore_transfer_s": counters.restore_transfer_s,
            "park_recomputed_tokens": float(counters.park_recomputed_tokens),
            "restore_recompute_s": counters.restore_recompute_s,
            "weight_version": float(self.weight_version),
            "asleep": float(self._asleep),
        }

    # ------------------------------------------------------------------ caller-side helpers

    def _new_call(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> _Call:
        """Validate a request on the caller's side so bad input fails fast with a clear error."""
        self._check_usable()
        if not isinstance(sampling, SamplingParams):
            raise TypeError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
        if not len(prompt_ids):
            raise InvalidTokenError("prompt_ids is empty: a call needs at least one prompt token")
        if len(prompt_ids) > self.max_context - 1:
            raise PromptTooLongError(
                f"prompt has {len(prompt_ids)} tokens but the context is {self.max_context} tokens "
                f"(at most {self.max_context - 1} prompt tokens leave room for one new token); never truncated"
            )
        stop_ids = check_token_ids(sampling.stop_token_ids, self.vocab_size, "sampling.stop_token_ids")
        # The prompt's ids are checked and copied on the engine thread (``_enqueue``): time per prompt token
        # stays off the caller's event loop.
        return _Call(
            session_id=session_id,
            prompt=prompt_ids,  # type: ignore[arg-type]
            sampling=sampling,
            sampler=RowSampler.from_params(sampling, self._runner.device),
            stop_ids=self._eos_ids | frozenset(stop_ids),
            future=concurrent.futures.Future(),
            submitted=time.perf_counter(),
        )

    def _check_usable(self) -> None:
        if self._closed:
            raise EngineAsleepError(f"engine {self.engine_id} is closed")
        if self._asleep:
            raise EngineAsleepError(f"engine {self.engine_id} is asleep (weights freed); call wake() first")
        if self._needs_weights:
            raise EngineAsleepError(
                f"engine {self.engine_id} woke from sleep(level=2) with checkpoint weights but had version "
                f"{self.weight_version}; call load_weights() before generating"
            )

    def _post(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        """Run ``fn`` on the engine thread (started on first use); a future of its result."""
        with self._thread_lock:
            if self._closed:
                raise EngineAsleepError(f"engine {self.engine_id} is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"gyre-{self.engine_id}", daemon=True)
                self._thread.start()
            elif not self._thread.is_alive():
                raise EngineAsleepError(f"engine {self.engine_id} is closed")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._commands.put((fn, future))
        return future

    async def _command(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.wrap_future(self._post(fn))

    # ------------------------------------------------------------------ engine thread: loop

    def _loop(self) -> None:
        while not self._stopping:
            self._run_commands(block=not (self._waiting or self._running))
            if self._stopping:
                break
            try:
                self._iteration()
            except Exception as error:  # a failed step fails its calls, not the engine
                log.exception("engine %s: step failed", self.engine_id)
                for call in list(self._running):
                    self._running.remove(call)
                    _resolve(call.future, error=error)
        self._abort_calls(lambda c: True)
        self._store.clear()
        self._parked.clear()
        while True:  # answer commands that raced with close()
            try:
                _, future = self._commands.get_nowait()
            except queue.Empty:
                break
            _resolve(future, error=EngineAsleepError(f"engine {self.engine_id} is closed"))

    def _run_commands(self, block: bool) -> None:
        while True:
            try:
                fn, future = self._commands.get(block=block)
            except queue.Empty:
                return
            block = False
            try:
                _resolve(future, result=fn())
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting caller
                _resolve(future, error=error)

    def _stop(self) -> None:
        self._stopping = True

    def _iteration(self) -> None:
        self._drop_cancelled()
        self._admit()
        if not self._running:
            return
        self._fit_budget()
        start = time.perf_counter()
        produced = self._prefill_step() + self._decode_step()
        self._meter.record(start, time.perf_counter(), produced)
        self._store.evict(reserved=self._running_tokens())

    # ------------------------------------------------------------------ engine thread: scheduling

    def _enqueue(self, call: _Call) -> None:
        try:
            self._check_usable()
            call.prompt = check_token_ids(call.prompt, self.vocab_size, "prompt_ids")
        except (EngineAsleepError, InvalidTokenError) as error:
            _resolve(call.future, error=error)
            return
        call.tokens = list(call.prompt)
        self._waiting.append(call)

    def _admit(self) -> None:
        busy = {call.session_id for call in self._running}
        keep: deque[_Call] = deque()
        while self._waiting:
            call = self._waiting.popleft()
            full = len(self._running) >= self.max_batch_size
            over_budget = bool(self._running) and (self._reserved_tokens() + len(call.tokens) > self._store.max_tokens)
            if full or over_budget or call.session_id in busy:
                keep.append(call)
                if call.admitted is not None and call.session_id not in busy:
                    keep.extend(self._waiting)  # a preempted call goes first: nothing overtakes it
                    self._waiting.clear()
                continue
            self._start(call)
            busy.add(call.session_id)
        self._waiting = keep

    def _start(self, call: _Call) -> None:
        if call.admitted is not None:  # preempted earlier: its whole context is recomputed
            self._running.append(call)
            return
        entry = self._store.take(call.session_id)
        parked = entry is None and call.session_id in self._parked
        if parked:
            entry = self._parked.take(call.session_id)
        reuse = self._usable_prefix(entry, call.prompt) if entry is not None else 0
        if entry is not None and reuse > 0:
            reused = entry.truncated(reuse)
            call.kv = self._runner.new_row(self._restore(reused).layers if parked else reused.layers)
            call.kv_version = entry.weight_version
        elif entry is None:  # an evicted cache, or a parked one dropped: what it held is fed again
            evicted = min(self._store.evicted_tokens(call.session_id), len(call.prompt) - 1)
            dropped = min(self._parked.dropped_tokens(call.session_id), len(call.prompt) - 1)
            self._counters.recomputed_tokens += max(evicted, dropped)
            self._counters.park_recomputed_tokens += dropped
            call.park_recompute_left = dropped
        call.cached_tokens = reuse
        call.admitted = time.perf_counter()
        self._counters.prompt_tokens += len(call.prompt)
        self._counters.prefix_hit_tokens += reuse
        self._running.append(call)

    def _reserved_tokens(self) -> int:
        """KV tokens running calls hold once this step has fed them: each call's tokens so far."""
        return sum(len(call.tokens) for call in self._running)

    def _fit_budget(self) -> None:
        """Before a step: evict idle caches, then preempt the most recently admitted calls, until the running
        calls' caches after the step fit ``max_cached_tokens`` (one call always fits: its context does)."""
        reserved = self._reserved_tokens()
        self._store.evict(reserved=reserved)
        while reserved > self._store.max_tokens and len(self._running) > 1:
            call = self._running.pop()
            reserved -= len(call.tokens)
            self._counters.preemptions += 1
            self._counters.recomputed_tokens += call.kv_len
            call.kv = None
            self._waiting.appendleft(call)

    def _usable_prefix(self, entry: SessionKV, prompt: list[int]) -> int:
        """How many cached tokens this prompt can reuse (never the whole prompt: the last prompt token
        is always fed, its logits give the first new token)."""
        limit = len(prompt) - 1
        fresh = entry.weight_version == self.weight_version or self.reuse_stale_kv
        if entry.imported:
            matches = len(entry) <= len(prompt) and prompt[: len(entry)] == entry.tokens
            if not (matches and fresh):
                self._counters.kv_import_fallbacks += 1
                return 0
            return min(len(entry), limit)
        if not fresh:
            self._counters.stale_recomputes += 1
            return 0
        return min(common_prefix_length(entry.tokens, prompt), limit)

    def _running_tokens(self) -> int:
        return sum(call.kv_len for call in self._running)

    def _drop_cancelled(self) -> None:
        if any(call.future.cancelled() for call in self._waiting) or any(
            call.future.cancelled() for call in self._running
        ):
            self._abort_calls(lambda c: c.future.cancelled())

    # ------------------------------------------------------------------ engine thread: compute

    def _prefill_step(self) -> int:
        """Feed pending prompt pieces of calls whose cache is behind by more than one token."""
        budget = self.prefill_tokens_per_step
        produced = 0
        for call in list(self._running):
            pending = len(call.tokens) - call.kv_len
            if call.kv_len > 0 and pending == 1:
                continue  # decodes this step
            if budget <= 0:
                break
            size = min(pending, self.prefill_chunk_tokens)
            piece = call.tokens[call.kv_len : call.kv_len + size]
            if call.kv is None:
                call.kv, call.kv_version = self._runner.new_row(), self.weight_version
            started = time.perf_counter()
            logits = self._runner.forward([call.kv], [piece])
            if call.park_recompute_left:  # the recomputed tokens' share of this piece's time
                share = min(size, call.park_recompute_left)
                self._counters.restore_recompute_s += (time.perf_counter() - started) * share / size
                call.park_recompute_left -= share
            call.prefilled_tokens += size
            budget -= size
            if call.kv_len == len(call.tokens):
                self._advance([call], logits)
                produced += 1
        return produced

    def _decode_step(self) -> int:
        """One batched forward for every call that is exactly one token behind."""
        rows = [call for call in self._running if call.kv_len > 0 and len(call.tokens) - call.kv_len == 1]
        if not rows:
            return 0
        logits = self._runner.forward([call.kv for call in rows], [[call.tokens[-1]] for call in rows])
        self._advance(rows, logits)
        return len(rows)

    def _advance(self, calls: list[_Call], logits: torch.Tensor) -> None:
        """Sample one token per call, append it and finish the calls that are done."""
        tokens, logprobs = sample_rows(logits, [call.sampler for call in calls])
        now = time.perf_counter()
        self._counters.generated_tokens += len(tokens)
        for call, token, logprob in zip(calls, tokens, logprobs, strict=True):
            call.tokens.append(token)
            call.response.append(token)
            call.logprobs.append(logprob)
            if call.first_token is None:
                call.first_token = now
                call.version_first = self.weight_version
            if token in call.stop_ids:
                self._finish(call, "stop")
            elif len(call.response) >= call.sampling.max_new_tokens or len(call.tokens) >= self.max_context:
                self._finish(call, "length")

    def _finish(self, call: _Call, reason: str) -> None:
        """Deliver the result and give the session its cache back."""
        if call in self._running:
            self._running.remove(call)
        elif call in self._waiting:
            self._waiting.remove(call)
        if call.kv is not None and call.kv_len > 0:
            entry = SessionKV(call.tokens[: call.kv_len], call.kv.layers(), call.kv_version).compacted()
            self._store.put(call.session_id, entry, reserved=self._running_tokens())
        call.kv = None
        now = time.perf_counter()
        timings = {
            "queue_s": (call.admitted or now) - call.submitted,
            "ttft_s": (call.first_token or now) - call.submitted,
            "total_s": now - call.submitted,
            "prefill_tokens": float(call.prefilled_tokens),
        }
        if call.version_first is not None and call.version_first != self.weight_version:
            timings["weight_version_first"] = float(call.version_first)
        self._counters.calls_finished += 1
        self._counters.calls_aborted += reason == "abort"
        _resolve(
            call.future,
            result=Generation(
                response_ids=list(call.response),
                logprobs=list(call.logprobs),
                finish_reason=reason,  # type: ignore[arg-type]
                weight_version=self.weight_version,
                cached_tokens=call.cached_tokens,
                timings=timings,
            ),
        )

    def _abort_calls(self, which: Callable[[_Call], bool]) -> int:
        chosen = [call for call in list(self._running) + list(self._waiting) if which(call)]
        for call in chosen:
            self._finish(call, "abort")
        return len(chosen)

    # ------------------------------------------------------------------ engine thread: sessions

    def _park(self, session_id: str) -> bool:
        if self._asleep or self._has_calls(session_id):
            return False
        entry = self._store.take(session_id)
        if entry is None:
            return False
        self._counters.parks += 1
        nbytes = kv_bytes(entry)
        if self._parked.fits(nbytes):
            self._parked.put(session_id, on_device(entry, "cpu"), nbytes)
            self._counters.park_bytes_to_host += nbytes
        else:
            self._parked.drop(session_id, len(entry))
        return True

    def _has_calls(self, session_id: str) -> bool:
        """Whether the session has a call running or queued (its cache is in use)."""
        return any(call.session_id == session_id for call in list(self._running) + list(self._waiting))

    def _end_session(self, session_id: str) -> None:
        if not self._has_calls(session_id):
            self._store.take(session_id)
        self._parked.forget(session_id)

    def _restore(self, entry: SessionKV) -> SessionKV:
        """A parked cache (the part a call reuses) moved back to the engine's device, counted."""
        started = time.perf_counter()
        restored = on_device(entry, self._runner.device)
        self._counters.restores += 1
        self._counters.restore_bytes_from_host += kv_bytes(entry)
        self._counters.restore_transfer_s += time.perf_counter() - started
        return restored

    def _export(self, session_id: str) -> KVState | None:
        entry = self._store.get(session_id)
        if entry is None:
            entry = self._parked.get(session_id)
        if entry is None:
            if any(call.session_id == session_id for call in self._running):
                raise RuntimeError(f"session {session_id!r} has a call in flight; export it after the call ends")
            return None
        return KVState(
            tokens=list(entry.tokens),
            weight_version=entry.weight_version,
            tensors=[(k.detach().to("cpu", copy=True), v.detach().to("cpu", copy=True)) for k, v in entry.layers],
            meta={"engine": self.kind, "engine_id": self.engine_id, "model": self.model_path, "dtype": self.dtype},
        )

    def _import(self, session_id: str, state: KVState) -> None:
        if self._has_calls(session_id):
            raise RuntimeError(f"session {session_id!r} has a call in flight here; import before calling it")
        tokens = check_token_ids(state.tokens, self.vocab_size, "state.tokens")
        if not state.tensors:
            self._counters.kv_import_fallbacks += 1  # nothing to adopt (e.g. exported by a vLLM engine)
            self._store.take(session_id)
            self._parked.forget(session_id)
            return
        runner = self._runner
        if len(state.tensors) != runner.num_layers:
            raise ValueError(f"state.tensors has {len(state.tensors)} layers, this model has {runner.num_layers}")
        expected = (runner.num_kv_heads, len(tokens), runner.head_dim)
        layers: list[LayerKV] = []
        model_dtype = getattr(torch, self.dtype)
        for index, (key, value) in enumerate(state.tensors):
            for name, tensor in (("key", key), ("value", value)):
                if tuple(tensor.shape) != expected:
                    raise ValueError(
                        f"state.tensors[{index}] {name} has shape {tuple(tensor.shape)}, expected {expected} "
                        "(kv_heads, len(tokens), head_dim)"
                    )
            layers.append((key.to(runner.device, model_dtype), value.to(runner.device, model_dtype)))
        entry = SessionKV(tokens, layers, int(state.weight_version), imported=True, meta=dict(state.meta))
        self._parked.forget(session_id)
        self._store.put(session_id, entry, reserved=self._running_tokens())

    # ------------------------------------------------------------------ engine thread: weights, sleep

    def _load_weights(self, weights: Iterable[tuple[str, Any]], version: int) -> None:
        if self._asleep:
            raise EngineAsleepError(f"engine {self.engine_id} is asleep; wake() it before load_weights")
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError(f"version must be an int, got {version!r}")
        targets = self._runner.model.state_dict(keep_vars=True)
        updates = []
        for name, tensor in weights:
            target = targets.get(name)
            if target is None:
                example = next(iter(targets))
                raise KeyError(f"load_weights: {name!r} is not a parameter of this model (names look like {example!r})")
            if tuple(tensor.shape) != tuple(target.shape):
                raise ValueError(
                    f"load_weights: {name} has shape {tuple(tensor.shape)}, the model {tuple(target.shape)}"
                )
            updates.append((target, tensor))
        with torch.no_grad():
            for target, tensor in updates:
                target.copy_(tensor.to(device=target.device, dtype=target.dtype))
        self.weight_version = version
        self._needs_weights = False
        if not self.reuse_stale_kv:
            for call in self._running:  # recompute their prefix with the new weights at the next step
                if call.kv_len:
                    self._counters.stale_recomputes += 1
                call.kv = None

    def _sleep(self, level: int) -> None:
        if self._asleep:
            return
        self._abort_calls(lambda c: True)
        self._store.clear()
        self._parked.clear()
        # Swap each tensor's storage for an empty one in place: Parameter objects (and so tied weights)
        # survive, and the memory goes (level 1 keeps a host copy; on CPU that copy is the same storage).
        host: dict[str, torch.Tensor] = {}
        for name, tensor in _model_tensors(self._runner.model):
            if level == 1:
                host[name] = tensor.data.to("cpu")
            tensor.data = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
        self._host_weights = host if level == 1 else None
        self._asleep, self._sleep_level = True, level
        if str(self.device).startswith("cuda"):
            torch.cuda.empty_cache()

    def _wake(self) -> None:
        if not self._asleep:
            return
        if self._sleep_level == 1 and self._host_weights is not None:
            for name, tensor in _model_tensors(self._runner.model):
                tensor.data = self._host_weights[name].to(self.device)
            self._host_weights = None
        else:
            from gyre.models import load_model

            model = load_model(self.model_path, dtype=self.dtype, device=self.device, attn_implementation="sdpa")
            self._runner = HFRunner(model.eval())
            self._needs_weights = self.weight_version != 0
        self._asleep, self._sleep_level = False, 0


def _model_tensors(model: Any) -> list[tuple[str, torch.Tensor]]:
    """Every parameter (tied ones once) and buffer (persistent or not, e.g. rotary ``inv_freq``)."""
    return list(model.named_parameters()) + list(model.named_buffers())


def _eos_ids(model: Any) -> set[int]:
    """EOS ids from the generation config, else the model config (an int or a list in either)."""
    for source in (getattr(model, "generation_config", None), model.config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is not None:
            return {int(v) for v in (value if isinstance(value, (list, tuple)) else [value])}
    return set()


def _resolve(future: concurrent.futures.Future, result: Any = None, error: BaseException | None = None) -> None:
    """Complete a future unless its caller already cancelled it."""
    if future.done():
        return
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass
