"""How the proxy's per-call work and memory grow over one long execution (no engine, no HTTP).

One agent conversation grows turn by turn (a short assistant turn, then a tool result of ``--result-chars``),
and each request goes through the proxy's token-exact prompt planning (``PromptBuilder.plan`` + ``commit``,
the chat template and tokenizer of ``--model``), exactly as ``/v1/chat/completions`` does. Measured at
checkpoints: the prompt's tokens, the planning time per call (median of the last 5 calls; event-loop time the proxy spends before
the engine sees the call), the memory the execution's call history holds (tracemalloc), and the bytes
of record log written so far (record lines as the proxy writes them: a continuation is its parent call's
id plus the new tokens). Timings are taken under tracemalloc, which slows allocation; see
``benchmarks/long_horizon.py`` for the 1M-token run without it.

    python benchmarks/proxy_long_context.py --out long_context.json [--turns 240] [--every 60]

``--out`` writes a flat JSON object: ``prompt_tokens_turn<N>``, ``plan_ms_turn<N>``, ``history_mib_turn<N>``,
``records_mib_turn<N>`` for each checkpoint turn N.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from pathlib import Path

from tqdm import tqdm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", help="model path whose tokenizer and chat template are used")
    parser.add_argument("--turns", type=int, default=240)
    parser.add_argument("--every", type=int, default=60, help="report every this many turns")
    parser.add_argument("--result-chars", type=int, default=2000, help="characters of each tool result")
    parser.add_argument("--history-calls", type=int, default=64, help="proxy.history_calls")
    parser.add_argument("--out", help="write the checkpoints as JSON here")
    args = parser.parse_args()

    from gyre.chat import ChatTemplate, Conversation, Message
    from gyre.chat.history import PromptBuilder
    from gyre.models import load_tokenizer
    from gyre.protocol import CallRecord
    from gyre.proxy.record_format import encode_record

    template = ChatTemplate(load_tokenizer(args.model))
    builder = PromptBuilder(template, max_calls=args.history_calls)
    messages = [Message("system", "You are a coding agent."), Message("user", "Fix the failing test.")]
    line = "output line of the tool, turn {turn}\n"
    record_bytes = 0
    plan_times: list[float] = []
    checkpoints = []
    tracemalloc.start()
    for turn in tqdm(range(1, args.turns + 1), desc="turns"):
        started = time.perf_counter()
        plan = builder.plan(Conversation(tuple(messages)))
        plan_times.append(time.perf_counter() - started)
        text = f"I will run command number {turn}."
        assistant = Message("assistant", text)
        response = template.encode(text) + [template.eos_token_id]
        builder.commit(plan, f"call-{turn}", response, assistant, stopped=True)
        record = CallRecord("long", f"call-{turn}", "main", plan.tokens, response, [-0.5] * len(response), 0)
        record_bytes += len(encode_record(record, as_delta=plan.parent_call_id is not None)) + 1
        result = line.format(turn=turn) * max(1, args.result_chars // len(line.format(turn=turn)))
        messages += [assistant, Message("user", result)]
        if turn % args.every == 0 or turn == args.turns:
            history_bytes, _ = tracemalloc.get_traced_memory()  # the builder is nearly all that is allocated
            checkpoints.append({
                "turn": turn,
                "prompt_tokens": len(plan.prompt_ids),
                "plan_ms": statistics.median(plan_times[-5:]) * 1e3,  # of the last 5 calls
                "plan_reused_tokens": plan.reused_tokens,
                "history_mib": history_bytes / 2**20,
                "records_mib": record_bytes / 2**20,
            })
    print(f"{'turn':>5} {'prompt tokens':>14} {'plan ms':>8} {'history MiB':>12} {'records MiB':>12}")
    for c in checkpoints:
        print(f"{c['turn']:>5} {c['prompt_tokens']:>14} {c['plan_ms']:>8.1f} {c['history_mib']:>12.0f} {c['records_mib']:>12.0f}")
    if args.out:
        flat = {f"{key}_turn{c['turn']}": float(value) for c in checkpoints for key, value in c.items() if key != "turn"}
        Path(args.out).write_text(json.dumps(flat, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
