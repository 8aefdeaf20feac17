"""Million-token executions: the proxy's per-call cost, chunked training of long trees, the engine at 100K+.

    python benchmarks/long_horizon.py --out long.json

Three parts, each on real components (the tiny model's tokenizer, chat template and weights; real record
files; the real engine):

1. Proxy. One agent execution grows call by call past 1,000,000 prompt tokens over 400+ calls (a
   system prompt, a bash tool, each turn a tool call and a ~``--tool-chars`` tool result). Each request's
   messages are fresh objects, as a parsed HTTP body gives them (the garbage collector's young generations
   are emptied before the clock starts: collecting a parsed request is the parse's cost). Timed per call:
   planning (``PromptBuilder.plan`` + ``commit``: event-loop time before the engine sees the call) as the
   CPU time of the planning thread (wall time beside it as ``plan_wall_ms_*``: on a shared machine it also
   counts time other processes held the core), and the record write (``RecordWriter``, delta lines). At
   prompt-length checkpoints (50K ... 1M tokens): planning time (median of the last 9 calls), the memory
   the call history retains, record bytes so far, and for
   comparison one full rendering of the conversation (what every call cost before) and the JSON parse
   of the request body (clients resend the whole history: that part is O(conversation) by the API).
   In a second pass the same requests go through a builder on the full-rendering path (``incremental=False``;
   its prompts must be identical), whose planning time is reported as ``full_path_plan_ms_*``.
   ``plan_ms_growth`` = planning time at the last checkpoint / at the first; ``record_bytes_per_new_token``
   = record file bytes / tokens new across the execution (new prompt tokens + response tokens);
   ``history_mib_at_1m``. The first calls' records are read back and compared with what was sent.
2. Training. Synthetic agent trees (retries, sub-agents, summaries every ``--summary-every`` turns, so a
   root-to-leaf path stays bounded as real contexts are) grown from 16K to 256K tokens, each trained in
   one subprocess with chunks of ``--chunk`` tokens: time per token, peak resident memory of the step
   (the process's high-water mark, reset before the step) and the live path's keys/values. At the smallest
   size, in float64, the chunked loss and gradients are compared with whole-tree training
   (``chunk_exact_max_rel_err``) and the whole-tree step's peak memory is measured at the two smallest
   sizes for contrast. ``peak_mem_growth`` = peak at the largest tree / at the smallest, next to
   ``peak_mem_growth_expected``: the smallest tree's peak plus the growth of the live path's key/value
   stack (keys, values and their gradients) plus the growth of the batch's per-token index arrays (ids,
   depths, subtree ends, edges: tens of bytes per token, the one part that grows with the tree).
   ``time_per_token_growth`` = largest / smallest.
3. Engine. The hf engine with ``max_cached_tokens`` of 110K and two ~55K-token sessions: the KV it holds
   after every forward (must stay within the budget), the evicted session's recomputed tokens when it
   returns, and the error for a prompt over its window.

Timings are wall-clock on whatever else the machine runs: on a shared machine they are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHECKPOINTS = (50_000, 100_000, 250_000, 500_000, 1_000_000)
TRAIN_SIZES = (16_384, 32_768, 65_536, 131_072, 262_144)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write a flat JSON object here")
    parser.add_argument("--parts", default="proxy,training,engine", help="which parts to run (comma-separated)")
    parser.add_argument("--target-tokens", type=int, default=1_000_000, help="grow the execution's prompt past this")
    parser.add_argument("--tool-chars", type=int, default=5_500, help="characters of each tool result")
    parser.add_argument("--history-calls", type=int, default=64, help="proxy.history_calls")
    parser.add_argument("--train-sizes", type=int, nargs="+", default=list(TRAIN_SIZES), help="tree tokens")
    parser.add_argument("--chunk", type=int, default=4096, help="trainer.max_tokens_per_microbatch")
    parser.add_argument("--summary-every", type=int, default=40, help="turns between context summaries")
    parser.add_argument("--engine-tokens", type=int, default=55_000, help="prompt tokens of each engine session")
    parser.add_argument("--train-worker", type=int, help=argparse.SUPPRESS)  # internal: one training size
    parser.add_argument("--worker-mode", default="chunked", help=argparse.SUPPRESS)  # chunked | whole | exact
    args = parser.parse_args(argv)
    if len(args.train_sizes) < 2:
        parser.error("--train-sizes needs at least two sizes (its figures are growths from the smallest to the largest)")
    return args


# ------------------------------------------------------------------------------------------- 1. proxy


def fresh(message):
    """A copy with new string objects, as parsing a request body gives (nothing shared with the history)."""
    from gyre.chat import Message, ToolCall

    def copy(text: str) -> str:
        return text.encode().decode()

    calls = tuple(ToolCall(copy(c.id), copy(c.name), copy(c.arguments)) for c in message.tool_calls)
    return Message(message.role, copy(message.content), copy(message.reasoning), calls, copy(message.tool_call_id))


def retained_bytes(builder) -> int:
    """Bytes the builder's call history keeps reachable: nodes, conversations, messages and their strings,
    token sequences (each object once)."""
    seen: set[int] = set()
    total = 0

    def add(obj: Any, size: int | None = None) -> bool:
        nonlocal total
        if id(obj) in seen:
            return False
        seen.add(id(obj))
        total += sys.getsizeof(obj) if size is None else size
        return True

    for node in builder._calls.values():
        add(node)
        messages = node.conversation.messages
        if add(messages):
            for message in messages:
                if add(message):
                    for text in (message.content, message.reasoning, message.tool_call_id):
                        add(text)
                    for call in message.tool_calls:
                        add(call) and add(call.arguments)
        tokens = node.tokens
        while tokens is not None and add(tokens):
            add(tokens.own, tokens.own.nbytes + 112)
            tokens = tokens.parent
    return total


def grow_execution(args: argparse.Namespace, template: Any, incremental: bool, folder: Path | None) -> dict[str, Any]:
    """One execution grown past ``args.target_tokens`` through a ``PromptBuilder``: per-call planning times,
    the prompts (``TokenSeq``s) and, with a ``folder``, records written there and checkpoint statistics."""
    from gyre.chat import Conversation, Message, PromptBuilder, Tool, ToolCall
    from gyre.protocol import CallRecord
    from gyre.proxy.recorder import RecordWriter

    builder = PromptBuilder(template, max_calls=args.history_calls, incremental=incremental)
    tools = (Tool("bash", "Run a shell command.", {"type": "object", "properties": {"cmd": {"type": "string"}}}),)
    messages = [Message("system", "You are a coding agent working in a large repository."),
                Message("user", "The test suite fails; find and fix the bug.")]
    writer = RecordWriter(folder, fsync=False) if folder is not None else None
    plan_ms: list[float] = []  # CPU time of the planning thread
    plan_wall_ms: list[float] = []
    record_ms: list[float] = []
    prompts: list[Any] = []
    new_tokens = 0
    renderings: dict[str, int] = {}
    checkpoints: list[dict[str, Any]] = []
    pending = [c for c in CHECKPOINTS if c <= args.target_tokens]
    if args.target_tokens not in pending:
        pending.append(args.target_tokens)
    turn = 0
    while pending:
        turn += 1
        request = Conversation(tuple(fresh(m) for m in messages), tools)
        gc.collect(1)  # the collector's work on the freshly parsed request belongs to parsing, not planning
        started, started_cpu = time.perf_counter(), time.thread_time()
        plan = builder.plan(request)
        planned, planned_cpu = time.perf_counter(), time.thread_time()
        command = {"cmd": f"grep -n bug part{turn}.py"}
        text = f"Let me look.\n<tool_call>\n{json.dumps({'name': 'bash', 'arguments': command})}\n</tool_call>"
        response = template.encode(text) + [template.eos_token_id]
        call_id = f"call-{turn:04d}"
        write_start = write_end = time.perf_counter()
        write_end_cpu = time.thread_time()
        if writer is not None:
            record = CallRecord("long", call_id, "main", plan.tokens, response, [-0.5] * len(response), 0)
            write_start = time.perf_counter()
            writer.submit(record).result()
            write_end, write_end_cpu = time.perf_counter(), time.thread_time()
        assistant = Message("assistant", "Let me look.", "", (ToolCall(f"t{turn}", "bash", json.dumps(command)),))
        builder.commit(plan, call_id, response, assistant, stopped=True)
        committed, committed_cpu = time.perf_counter(), time.thread_time()
        plan_ms.append(((planned_cpu - started_cpu) + (committed_cpu - write_end_cpu)) * 1e3)
        plan_wall_ms.append(((planned - started) + (committed - write_end)) * 1e3)
        record_ms.append((write_end - write_start) * 1e3)
        prompts.append(plan.tokens)
        new_tokens += plan.new_tokens + len(response)
        renderings[plan.rendering] = renderings.get(plan.rendering, 0) + 1
        line = f"part{turn}.py:{{n}}: value = compute(value, {turn}) # output of the tool\n"
        result = "".join(line.format(n=n) for n in range(args.tool_chars // len(line)))
        messages += [assistant, Message("tool", result, tool_call_id=f"t{turn}")]
        if len(plan.tokens) < pending[0]:
            continue
        checkpoint: dict[str, Any] = {"threshold": pending.pop(0), "call": turn, "prompt_tokens": len(plan.tokens),
                                      "plan_ms": statistics.median(plan_ms[-9:]),
                                      "plan_wall_ms": statistics.median(plan_wall_ms[-9:])}
        if writer is not None:
            body = json.dumps({"model": "m", "messages": [{"role": m.role, "content": m.content} for m in messages]})
            parse_start = time.perf_counter()
            json.loads(body)
            parse_ms = (time.perf_counter() - parse_start) * 1e3
            render_start = time.perf_counter()
            template.render_prompt(request)
            checkpoint.update(
                full_render_ms=(time.perf_counter() - render_start) * 1e3, request_parse_ms=parse_ms,
                record_ms=statistics.median(record_ms[-9:]), history_mib=retained_bytes(builder) / 2**20,
                record_mib=writer.path("long").stat().st_size / 2**20,
            )
            print(f"  {len(plan.tokens):>9} tokens (call {turn}): plan {checkpoint['plan_ms']:.2f} ms, history "
                  f"{checkpoint['history_mib']:.1f} MiB, records {checkpoint['record_mib']:.1f} MiB, one full render "
                  f"{checkpoint['full_render_ms']:.0f} ms", flush=True)
        else:
            print(f"  {len(plan.tokens):>9} tokens (call {turn}): full-rendering path {checkpoint['plan_ms']:.1f} ms",
                  flush=True)
        checkpoints.append(checkpoint)
    if writer is not None:
        writer.close()
    return {"plan_ms": plan_ms, "prompts": prompts, "new_tokens": new_tokens, "renderings": renderings,
            "checkpoints": checkpoints, "calls": turn}


def proxy_part(args: argparse.Namespace) -> dict[str, Any]:
    from gyre.chat import ChatTemplate
    from gyre.models import load_tokenizer
    from gyre.proxy.recorder import read_record_file

    template = ChatTemplate(load_tokenizer("tiny"))
    folder = Path(tempfile.mkdtemp(prefix="gyre-long-"))
    try:
        quick = grow_execution(args, template, incremental=True, folder=folder)
        full = grow_execution(args, template, incremental=False, folder=None)  # same requests, whole renders
        same_prompts = quick["prompts"] == full["prompts"]
        # The first calls' records, read back from the file, are exactly the prompts sent.
        path = folder / "records" / "long.jsonl"
        head = folder / "head.jsonl"
        sent = quick["prompts"][:120]
        with path.open() as source, head.open("w") as target:
            for _ in range(len(sent)):
                target.write(source.readline())
        read = read_record_file(head)
        round_trip = len(read) == len(sent) and all(r.prompt_ids == s for r, s in zip(read, sent))
        file_bytes = path.stat().st_size
    finally:
        shutil.rmtree(folder)
    first, last = quick["checkpoints"][0], quick["checkpoints"][-1]
    full_first, full_last = full["checkpoints"][0], full["checkpoints"][-1]
    result: dict[str, Any] = {
        "proxy_calls": quick["calls"],
        "proxy_prompt_tokens": last["prompt_tokens"],
        "plan_ms_growth": last["plan_ms"] / first["plan_ms"],
        "plan_ms_first": first["plan_ms"],
        "plan_ms_last": last["plan_ms"],
        "plan_wall_ms_growth": last["plan_wall_ms"] / first["plan_wall_ms"],
        "plan_wall_ms_first": first["plan_wall_ms"],
        "plan_wall_ms_last": last["plan_wall_ms"],
        "plan_ms_mean_all_calls": statistics.fmean(quick["plan_ms"]),
        "plan_ms_max": max(quick["plan_ms"]),
        "full_path_plan_ms_first": full_first["plan_ms"],
        "full_path_plan_ms_last": full_last["plan_ms"],
        "full_path_plan_ms_growth": full_last["plan_ms"] / full_first["plan_ms"],
        "full_path_same_prompts": same_prompts,
        "record_ms_last": last["record_ms"],
        "record_bytes_per_new_token": file_bytes / quick["new_tokens"],
        "record_mib": file_bytes / 2**20,
        "new_tokens": quick["new_tokens"],
        "history_mib_at_1m": last["history_mib"],
        "full_render_ms_first": first["full_render_ms"],
        "full_render_ms_last": last["full_render_ms"],
        "request_parse_ms_last": last["request_parse_ms"],
        "records_round_trip": round_trip,
        **{f"proxy_{name}_renderings": count for name, count in sorted(quick["renderings"].items())},
    }
    for c in quick["checkpoints"]:
        for key in ("prompt_tokens", "plan_ms", "history_mib", "record_mib", "full_render_ms"):
            result[f"proxy_{key}_at_{c['threshold'] // 1000}k"] = c[key]
    for c in full["checkpoints"]:
        result[f"proxy_full_path_plan_ms_at_{c['threshold'] // 1000}k"] = c["plan_ms"]
    return result


# ------------------------------------------------------------------------------------------- 2. training


def synthetic_tree(tokens: int, summary_every: int):
    """A weighted synthetic agent tree of at least ``tokens`` tokens (turns grown until it is)."""
    from gyre.trajectory import assign_loss_weights, build_tree
    from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

    turns = max(8, tokens // 120)
    while True:
        spec = WorkloadSpec(turns=turns, subagents=max(1, turns // 40), subagent_turns=6,
                            summary_every=summary_every, retry_prob=0.2)
        tree = build_tree(synthetic_execution(f"t{tokens}", spec, seed=tokens).calls)
        if tree.num_tokens >= tokens:
            return assign_loss_weights(tree, 1.0, num_executions=1)
        turns = int(turns * 1.1 * tokens / tree.num_tokens) + 1


def memory_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def train_worker(args: argparse.Namespace) -> None:
    """One tree size in this process: prints one JSON line."""
    import numpy as np
    import torch

    from gyre.algo.losses import LossConfig
    from gyre.models import load_model
    from gyre.replica.step import StepConfig, microbatch_backward
    from gyre.trajectory import pack_trees

    torch.set_num_threads(1)
    tree = synthetic_tree(args.train_worker, args.summary_every)
    step_cfg = StepConfig(attention_backend="block")
    out: dict[str, Any] = {"tokens": tree.num_tokens, "max_depth": int(tree.depth.max()) + 1}
    if args.worker_mode == "exact":
        model = load_model("tiny", dtype="float64")
        model.train()
        results = []
        for limit in (10**9, args.chunk):
            model.zero_grad(set_to_none=True)
            stats = [microbatch_backward(model, b, LossConfig(), step_cfg) for b in pack_trees([tree], limit)]
            results.append((sum(s["loss"] for s in stats), {n: p.grad.clone() for n, p in model.named_parameters()}))
        (whole_loss, whole), (chunk_loss, chunked) = results
        errors = [float((chunked[n] - g).abs().max() / g.abs().max().clamp_min(1e-300)) for n, g in whole.items()]
        out.update(loss_rel_err=abs(chunk_loss - whole_loss) / abs(whole_loss), grad_max_rel_err=max(errors))
        print(json.dumps(out))
        return
    model = load_model("tiny")
    model.train()
    limit = args.chunk if args.worker_mode == "chunked" else 10**9
    warm = synthetic_tree(2 * args.chunk, args.summary_every)
    for batch in pack_trees([warm], limit):  # parameter gradients and allocator pools exist before measuring
        microbatch_backward(model, batch, LossConfig(), step_cfg)
    batches = pack_trees([tree], limit)
    model.zero_grad(set_to_none=False)
    before = memory_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark to the current size
    started = time.perf_counter()
    stats = [microbatch_backward(model, batch, LossConfig(), step_cfg) for batch in batches]
    seconds = time.perf_counter() - started
    peak = memory_kib("VmHWM")
    config = model.config
    per_row = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * 4  # K+V float32
    index = np.arange(tree.num_tokens)
    boundaries = range(args.chunk, tree.num_tokens, args.chunk)
    path_rows = max((int(((index < b) & (tree.subtree_end > b)).sum()) for b in boundaries), default=0)
    # Index arrays of the batch (ids, depths, subtree ends, edges and their weights) and the chunk runner's
    # sorted edge order: per-token metadata, the one part of the step that grows with the tree.
    tensors = batches[0].to_torch()
    index_bytes = sum(t.numel() * t.element_size() for t in tensors.values()) + 16 * int(tensors["edge_row"].shape[0])
    out.update(
        seconds=seconds, us_per_token=seconds / tree.num_tokens * 1e6, peak_mib=(peak - before) / 1024,
        index_arrays_mib=index_bytes / 2**20,
        chunks=sum(s.get("chunks", 1) for s in stats),
        recomputed_tokens=sum(s.get("chunk_recomputed_tokens", 0) for s in stats),
        live_path_rows=path_rows, live_path_kv_mib=path_rows * per_row / 2**20,
    )
    print(json.dumps(out))


def run_worker(args: argparse.Namespace, size: int, mode: str) -> dict[str, Any]:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}  # RSS = live memory
    command = [sys.executable, __file__, "--train-worker", str(size), "--worker-mode", mode, "--chunk", str(args.chunk),
               "--summary-every", str(args.summary_every)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"training worker ({size} tokens, {mode}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def training_part(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted(args.train_sizes)
    exact = run_worker(args, sizes[0], "exact")
    print(f"  exactness at {exact['tokens']} tokens (float64): loss {exact['loss_rel_err']:.1e}, "
          f"gradients {exact['grad_max_rel_err']:.1e}", flush=True)
    runs = []
    for size in sizes:
        runs.append(run_worker(args, size, "chunked"))
        r = runs[-1]
        print(f"  {r['tokens']:>7} tokens: {r['us_per_token']:.1f} us/token, peak {r['peak_mib']:.0f} MiB, "
              f"live path {r['live_path_rows']} rows = {r['live_path_kv_mib']:.2f} MiB K/V, "
              f"recomputed {r['recomputed_tokens']}", flush=True)
    whole = [run_worker(args, size, "whole") for size in sizes[:2]]
    first, last = runs[0], runs[-1]
    path_growth_mib = 2 * (last["live_path_kv_mib"] - first["live_path_kv_mib"])  # K/V and their gradients
    index_growth_mib = last["index_arrays_mib"] - first["index_arrays_mib"]
    result: dict[str, Any] = {
        "chunk_tokens": args.chunk,
        "chunk_exact_max_rel_err": max(exact["loss_rel_err"], exact["grad_max_rel_err"]),
        "chunk_exact_tokens": exact["tokens"],
        "peak_mem_growth": last["peak_mib"] / first["peak_mib"],
        "peak_mem_growth_expected": (first["peak_mib"] + path_growth_mib + index_growth_mib) / first["peak_mib"],
        "peak_mem_growth_expected_path_only": (first["peak_mib"] + path_growth_mib) / first["peak_mib"],
        "index_arrays_mib_largest": last["index_arrays_mib"],
        "peak_mib_smallest": first["peak_mib"],
        "peak_mib_largest": last["peak_mib"],
        "live_path_kv_mib_smallest": first["live_path_kv_mib"],
        "live_path_kv_mib_largest": last["live_path_kv_mib"],
        "time_per_token_growth": last["us_per_token"] / first["us_per_token"],
        "whole_tree_peak_mem_growth": whole[1]["peak_mib"] / whole[0]["peak_mib"],
        "whole_tree_token_growth": whole[1]["tokens"] / whole[0]["tokens"],
    }
    for run in runs:
        key = f"{run['tokens'] // 1024}k"
        names = ("tokens", "us_per_token", "peak_mib", "live_path_rows", "live_path_kv_mib", "recomputed_tokens",
                 "max_depth", "index_arrays_mib")
        for name in names:
            result[f"train_{name}_{key}"] = run[name]
    for run in whole:
        result[f"whole_tree_peak_mib_{run['tokens'] // 1024}k"] = run["peak_mib"]
    return result


# ------------------------------------------------------------------------------------------- 3. engine


def engine_part(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from gyre.models.factory import resolve_model_path
    from gyre.rollout.base import PromptTooLongError, SamplingParams
    from gyre.rollout.hf import HFEngine

    torch.set_num_threads(1)
    narrow = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 262_144}
    budget = 2 * args.engine_tokens
    engine = HFEngine(str(resolve_model_path("tiny", narrow)), max_cached_tokens=budget)
    held: list[int] = []
    forward = engine._runner.forward

    def observed(rows, tokens):
        logits = forward(rows, tokens)
        held.append(engine._store.total_tokens + sum(call.kv_len for call in engine._running))
        return logits

    engine._runner.forward = observed
    generator = torch.Generator().manual_seed(0)

    def ids(n: int) -> list[int]:
        return torch.randint(16, 2000, (n,), generator=generator).tolist()

    greedy = SamplingParams(temperature=0.0, max_new_tokens=4)

    async def run() -> dict[str, Any]:
        first_prompt = ids(args.engine_tokens)
        started = time.perf_counter()
        first = await engine.generate("a", first_prompt, greedy)
        await engine.generate("b", ids(args.engine_tokens + 10), greedy)  # the budget cannot hold both: a goes
        again = await engine.generate("a", first_prompt + first.response_ids + ids(200), greedy)
        seconds = time.perf_counter() - started
        try:
            await engine.generate("c", ids(budget + 10), greedy)
            refused = "not refused"
        except PromptTooLongError as error:
            refused = str(error)
        return {"seconds": seconds, "again_cached": again.cached_tokens, "refused": refused}

    try:
        outcome = asyncio.run(run())
        stats = engine.stats()
    finally:
        asyncio.run(engine.close())
    print(f"  engine: held at most {max(held)} of {budget} KV tokens; recomputed {stats['recomputed_tokens']:.0f} "
          f"tokens after {stats['evictions']:.0f} evictions; over-window prompt: {outcome['refused'][:80]}", flush=True)
    return {
        "engine_max_cached_tokens": budget,
        "engine_peak_held_tokens": max(held),
        "engine_within_budget": max(held) <= budget,
        "engine_recomputed_tokens": stats["recomputed_tokens"],
        "engine_evictions": stats["evictions"],
        "engine_prompt_tokens": stats["prompt_tokens"],
        "engine_seconds": outcome["seconds"],
        "engine_over_window_error": outcome["refused"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.train_worker is not None:
        train_worker(args)
        return {}
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    unknown = parts - {"proxy", "training", "engine"}
    if unknown:
        raise SystemExit(f"--parts: unknown part(s) {sorted(unknown)}; choose from proxy, training, engine")
    result: dict[str, Any] = {}
    for name, part in (("proxy", proxy_part), ("training", training_part), ("engine", engine_part)):
        if name in parts:
            print(f"{name}:", flush=True)
            started = time.perf_counter()
            result.update(part(args))
            result[f"{name}_part_s"] = time.perf_counter() - started
    targets = {
        "plan_ms_growth": ("<=", 1.5), "record_bytes_per_new_token": ("<=", 16), "history_mib_at_1m": ("<=", 64),
        "chunk_exact_max_rel_err": ("<=", 1e-5), "time_per_token_growth": ("<=", 2),
    }
    print(f"{'key':<32} {'value':>14}  target")
    for key, value in result.items():
        target = targets.get(key)
        verdict = ""
        if target is not None:
            verdict = f"{target[0]} {target[1]}: " + ("met" if value <= target[1] else "NOT MET")
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)[:60]
        print(f"{key:<32} {shown:>14}  {verdict}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True))
    return result


if __name__ == "__main__":
    main()
