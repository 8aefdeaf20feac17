"""Tree-packed vs per-path training on a synthetic agentic workload, side by side in one run.

    python benchmarks/tree_training.py --out tree_training.json

Trains one step tree-packed (one packed sequence per micro-batch, shared prefixes computed once) and one
step per-path (every root-to-leaf path as its own causal sequence) on the same trees and the same model,
and reports tokens and forward+backward wall time of each. The target is ``time_ratio <= 1.15 *
token_ratio``: tree training costs what its unique tokens cost. It then times the tree step with the
path cap ``max_paths=5`` against uncapped on a workload with more than 5 paths per execution.

On a GPU: ``--device cuda`` (the tree attention backend then defaults to flex_attention; ``--dtype bfloat16``
computes as a GPU cell's mixed-precision replica does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from gyre.algo.advantages import compute_advantages
from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.trainer.per_path import expand_paths, path_backward
from gyre.replica.step import StepConfig, microbatch_backward
from gyre.trajectory import (
    assign_loss_weights,
    build_tree,
    pack_trees,
    prune_tree,
    select_paths,
)
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=2)
    parser.add_argument("--turns", type=int, default=16, help="main-agent calls per execution")
    parser.add_argument("--subagents", type=int, default=2)
    parser.add_argument("--subagent-turns", type=int, default=4)
    parser.add_argument("--retry-prob", type=float, default=0.25)
    parser.add_argument("--summary-every", type=int, default=0)
    parser.add_argument("--response-tokens", type=int, nargs=2, default=(16, 64))
    parser.add_argument("--tool-tokens", type=int, nargs=2, default=(32, 160))
    # Wide and shallow: per-token (MLP, projection) work dominates attention as in real LLMs, where
    # hidden sizes are in the thousands; a very narrow model would make attention the whole cost.
    parser.add_argument("--hidden", type=int, default=768, help="tiny model width for the benchmark")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16384, help="trainer.max_tokens_per_microbatch")
    parser.add_argument("--block-size", type=int, default=4096, help="longest chain block of the tree attention")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed rounds (tree, per-path and capped steps take turns); medians are reported")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default="float32", help="the model's dtype (float32, bfloat16)")
    parser.add_argument("--backend", default="auto",
                        help="tree attention backend: auto (flex on CUDA, block on CPU), dense, block, flex")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None, help="write a flat JSON object here")
    return parser.parse_args()


def build_trees(args, spec: WorkloadSpec, max_paths: int | None):
    executions = [synthetic_execution(f"e{i}", spec, args.seed + i, group=f"g{i // 2}") for i in range(args.executions)]
    advantages = compute_advantages([e.reward for e in executions], [e.group for e in executions])
    rng = np.random.default_rng(args.seed)
    trees = []
    for execution, advantage in zip(executions, advantages):
        tree = build_tree(execution.calls)
        tree = prune_tree(tree, select_paths(tree, max_paths, rng))
        trees.append(assign_loss_weights(tree, advantage, num_executions=len(executions)))
    return trees, advantages


def timed_side_by_side(fns: dict[str, Callable[[], None]], repeats: int) -> dict[str, list[float]]:
    """Wall times of each function over ``repeats`` rounds, the functions taking turns within a round, so
    that load drifting on a shared machine hits all of them alike (ratios are then taken per round)."""
    for fn in fns.values():
        fn()  # warm-up (allocator, kernels)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    return times


def main() -> dict[str, float]:
    args = parse_args()
    torch.manual_seed(args.seed)
    model = load_model(
        "tiny",
        tiny_overrides={
            "hidden_size": args.hidden, "intermediate_size": 3 * args.hidden, "num_hidden_layers": args.layers,
            "num_attention_heads": max(1, args.hidden // 64), "num_key_value_heads": max(1, args.hidden // 256),
            "head_dim": 64,
        },
        device=args.device, dtype=args.dtype,
    )
    model.train()
    loss_cfg = LossConfig()
    step_cfg = StepConfig(attention_backend=args.backend, attention_block_size=args.block_size)
    synchronize = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    spec = WorkloadSpec(
        turns=args.turns, subagents=args.subagents, subagent_turns=args.subagent_turns, retry_prob=args.retry_prob,
        summary_every=args.summary_every, response_tokens=tuple(args.response_tokens),
        tool_tokens=tuple(args.tool_tokens), vocab_size=2000,
    )

    def tree_step(trees):
        batches = pack_trees(trees, args.max_tokens)

        def run():
            model.zero_grad(set_to_none=True)
            for batch in batches:
                microbatch_backward(model, batch, loss_cfg, step_cfg)
            synchronize()  # a CUDA step's time is its kernels', not their launch

        return run

    def path_step(trees, advantages):
        samples = expand_paths(trees, advantages, num_executions=len(trees), aggregation="execution_token_mean")

        def run():
            model.zero_grad(set_to_none=True)
            for sample in samples:
                path_backward(model, sample, loss_cfg)
            synchronize()

        return run

    trees, advantages = build_trees(args, spec, max_paths=None)
    tree_tokens = sum(t.num_tokens for t in trees)
    path_tokens = sum(t.path_token_count() for t in trees)
    paths = sum(t.num_paths for t in trees)
    capped_trees, _ = build_trees(args, spec, max_paths=5)
    times = timed_side_by_side(
        {"tree": tree_step(trees), "path": path_step(trees, advantages), "capped": tree_step(capped_trees)},
        args.repeats,
    )
    tree_time, path_time, capped_time = (statistics.median(times[k]) for k in ("tree", "path", "capped"))
    time_ratio = statistics.median(t / p for t, p in zip(times["tree"], times["path"], strict=True))
    Console().print("per round (s): " + "  ".join(
        f"tree {t:.2f} path {p:.2f} capped {c:.2f}" for t, p, c in zip(times["tree"], times["path"], times["capped"])))
    capped_time_ratio = statistics.median(c / t for c, t in zip(times["capped"], times["tree"], strict=True))

    result = {
        "executions": args.executions,
        "paths": paths,
        "paths_per_execution": paths / args.executions,
        "path_tokens": path_tokens,
        "tree_tokens": tree_tokens,
        "token_ratio": tree_tokens / path_tokens,
        "tree_time_s": tree_time,
        "path_time_s": path_time,
        "time_ratio": time_ratio,  # median of the per-round ratios
        "time_vs_token_ratio": time_ratio / (tree_tokens / path_tokens),
        "capped_paths": sum(t.num_paths for t in capped_trees),
        "capped_tree_tokens": sum(t.num_tokens for t in capped_trees),
        "capped_time_s": capped_time,
        "capped_time_ratio": capped_time_ratio,
        "model_hidden": args.hidden,
        "model_layers": args.layers,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "dtype": args.dtype,
        "attention_backend": args.backend,
        "threads": torch.get_num_threads(),
    }
    table = Table(title="tree-packed vs per-path training (one step, forward+backward)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)
    target = 1.15 * result["token_ratio"]
    verdict = "meets" if result["time_ratio"] <= target else "MISSES"
    Console().print(f"time ratio {result['time_ratio']:.3f} {verdict} the target <= 1.15 x token ratio = {target:.3f}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=2)
    return result


if __name__ == "__main__":
    main()
