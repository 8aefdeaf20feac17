"""A tree longer than a micro-batch, trained in chunks, has exactly the loss and gradients of training it whole."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from gyre.algo.advantages import compute_advantages
from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.ops.chunked import chunked_tree_backward
from gyre.protocol import TrajectoryTree
from gyre.replica.step import StepConfig, microbatch_backward, proximal_logprobs
from gyre.trajectory import assign_loss_weights, build_tree, pack_trees
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

SHAPES = {
    # One long conversation: every row is on the one path, boundaries fall inside prompts and responses.
    "deep_chain": WorkloadSpec(turns=9, system_tokens=10, task_tokens=8, response_tokens=(3, 9), tool_tokens=(2, 8),
                               retry_prob=0.0, subagents=0, summary_every=0),
    # Retries, sub-agents and summaries: many branches off shared prefixes.
    "bushy": WorkloadSpec(turns=6, system_tokens=12, task_tokens=10, response_tokens=(2, 7), tool_tokens=(1, 6),
                          retry_prob=0.6, subagents=2, subagent_turns=2, summary_every=3),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def model64(tiny_model_path):
    model = load_model(tiny_model_path, dtype="float64")
    model.train()
    return model


def weighted_trees(model, shape: str, seed: int, aggregation: str, count: int = 3) -> list[TrajectoryTree]:
    """Trees with advantages of both signs and behaviour log-probs near the model's (so clipping bites)."""
    rng = np.random.default_rng(seed)
    executions = [synthetic_execution(f"{shape}{seed}-{i}", SHAPES[shape], seed * 10 + i) for i in range(count)]
    advantages = compute_advantages([float(rng.random()) for _ in executions], ["g"] * count)
    trees = [build_tree(execution.calls) for execution in executions]
    for tree in trees:
        assign_loss_weights(tree, 1.0, num_executions=1)
        dense = StepConfig(attention_backend="dense")
        logp = proximal_logprobs(model, pack_trees([tree], 10**9), LossConfig(), dense)[0]
        tree.behavior_logprob = tree.behavior_logprob.copy()
        tree.behavior_logprob[tree.edge_target] = (logp.numpy() + rng.normal(0, 0.4, logp.shape[0])).astype(np.float32)
    for tree, advantage in zip(trees, advantages):
        assign_loss_weights(tree, advantage, num_executions=count, aggregation=aggregation)
    return trees


def train(model, batches, cfg: LossConfig, step_cfg: StepConfig, ref_model=None):
    model.zero_grad(set_to_none=True)
    stats = [microbatch_backward(model, batch, cfg, step_cfg, ref_model=ref_model) for batch in batches]
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    return stats, grads


def assert_same(whole, chunked) -> None:
    (whole_stats, whole_grads), (chunk_stats, chunk_grads) = whole, chunked
    for key in ("loss", "pg_loss", "clipped_edges", "edges", "kl", "entropy"):
        expected = sum(s.get(key, 0.0) for s in whole_stats)
        assert sum(s.get(key, 0.0) for s in chunk_stats) == pytest.approx(expected, rel=1e-5, abs=1e-9), key
    assert whole_grads.keys() == chunk_grads.keys()
    for name, grad in whole_grads.items():
        error = float((chunk_grads[name] - grad).abs().max() / grad.abs().max().clamp_min(1e-12))
        assert error <= 1e-5, f"{name}: relative gradient error {error:.2e}"


def boundary_kinds(tree: TrajectoryTree, chunk_tokens: int) -> set[str]:
    """Where the chunk boundaries of ``tree`` fall: inside a shared prefix (a chain row that several paths
    cross), at a branch point (a row that is not the child of the row before) or inside a response."""
    kinds = set()
    through = tree.paths_through()
    for row in range(chunk_tokens, tree.num_tokens, chunk_tokens):
        if tree.parent[row] != row - 1:
            kinds.add("branch point")
        elif through[row] > 1:
            kinds.add("shared prefix")
        if tree.parent[row] == row - 1 and tree.is_policy[row] and tree.is_policy[row - 1]:
            kinds.add("response")
    return kinds


@pytest.mark.parametrize("aggregation", ["execution_token_mean", "path_token_mean"])
@pytest.mark.parametrize(("shape", "backend"), [("deep_chain", "block"), ("bushy", "block"), ("bushy", "dense")])
def test_chunked_training_equals_whole_tree_training(model64, shape, backend, aggregation):
    trees = weighted_trees(model64, shape, seed=len(aggregation), aggregation=aggregation)
    # Clipping (with a dual clip) against the behaviour policy, entropy and KL terms.
    cfg = LossConfig(clip_low=0.2, clip_high=0.25, dual_clip=3.0, entropy_coef=0.01, kl_coef=0.05, temperature=0.9)
    ref_model = copy.deepcopy(model64)
    with torch.no_grad():
        for parameter in ref_model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    step_cfg = StepConfig(attention_backend=backend, attention_block_size=8)
    whole = train(model64, pack_trees(trees, 10**9), cfg, step_cfg, ref_model)
    assert sum(s["clipped_edges"] for s in whole[0]) > 0, "clipping must be active for this test to mean anything"
    kinds: set[str] = set()
    for chunk_tokens in (13, 37):
        batches = pack_trees(trees, chunk_tokens)
        assert all(batch.chunk_tokens == chunk_tokens and len(batch.execution_ids) == 1 for batch in batches)
        chunked = train(model64, batches, cfg, step_cfg, ref_model)
        assert sum(s["chunks"] for s in chunked[0]) > len(trees)
        assert_same(whole, chunked)
        kinds |= {kind for tree in trees for kind in boundary_kinds(tree, chunk_tokens)}
    expected = {"shared prefix", "branch point", "response"} if shape == "bushy" else {"response"}
    assert expected <= kinds, kinds


def test_one_token_chunks_are_still_exact(model64):
    spec = WorkloadSpec(turns=3, system_tokens=6, task_tokens=4, response_tokens=(2, 4), tool_tokens=(1, 3),
                        retry_prob=1.0, subagents=1, subagent_turns=1)
    tree = build_tree(synthetic_execution("one", spec, 3).calls)
    assign_loss_weights(tree, np.where(np.arange(tree.num_paths) % 2 == 0, 1.0, -0.5), num_executions=1)
    # The recomputed proximal policy with truncated IS weights against the behaviour log-probs.
    cfg = LossConfig(proximal="recompute", tis_cap=1.5, entropy_coef=0.01)
    step_cfg = StepConfig(attention_backend="block", attention_block_size=4)
    whole = train(model64, pack_trees([tree], 10**9), cfg, step_cfg)
    chunked = train(model64, pack_trees([tree], 1), cfg, step_cfg)
    assert chunked[0][0]["chunks"] == tree.num_tokens
    assert_same(whole, chunked)


def test_only_the_live_path_keys_and_values_are_kept(model64):
    """The stacked keys/values peak at the longest root-to-boundary path, far below the tree's size."""
    trees = weighted_trees(model64, "bushy", seed=7, aggregation="execution_token_mean", count=2)
    tree = max(trees, key=lambda t: t.num_tokens)
    chunk_tokens = 16
    batch = pack_trees([tree], chunk_tokens)[0].to_torch()
    model64.zero_grad(set_to_none=True)
    _, report = chunked_tree_backward(
        model64, batch, chunk_tokens, lambda edges, logp, entropy: (-logp.sum(), {}), backend="block", block_size=8
    )
    index = np.arange(tree.num_tokens)
    boundaries = range(chunk_tokens, tree.num_tokens, chunk_tokens)
    path_at = [int(((index < b) & (tree.subtree_end > b)).sum()) for b in boundaries]
    assert report.peak_path_rows == max(path_at) <= tree.depth.max() + 1
    assert report.peak_path_rows < tree.num_tokens / 3
    assert report.recomputed_tokens <= sum(path_at)


@pytest.mark.gpu
def test_chunked_flex_on_cuda_equals_whole_tree_dense(tiny_model_path):
    """The CUDA backend through the same chunking (flex_attention with past keys/values in front)."""
    model = load_model(tiny_model_path, device="cuda", dtype="float32")
    model.train()
    trees = [build_tree(synthetic_execution(f"g{i}", SHAPES["bushy"], 50 + i).calls) for i in range(2)]
    for tree, advantage in zip(trees, (1.0, -1.0)):
        assign_loss_weights(tree, advantage, num_executions=2)
    cfg = LossConfig(entropy_coef=0.01)
    whole = train(model, pack_trees(trees, 10**9), cfg, StepConfig(attention_backend="dense"))
    chunked = train(model, pack_trees(trees, 29), cfg, StepConfig(attention_backend="flex"))
    for name, grad in whole[1].items():
        error = float((chunked[1][name] - grad).abs().max() / grad.abs().max().clamp_min(1e-12))
        assert error <= 1e-3, f"{name}: relative gradient error {error:.2e}"


def test_a_long_tree_with_no_generated_token_trains_as_a_zero_step(model64):
    """One call with an empty response (e.g. cut at once): nothing to train. Chunked, it reports the same
    zero statistics as the whole-tree route instead of failing (it raised KeyError: 'loss')."""
    from gyre.protocol import CallRecord

    call = CallRecord("empty-0", "empty-0:c0", "main", list(range(5, 45)), [], [], weight_version=0)
    tree = build_tree([call])
    assign_loss_weights(tree, 1.0, num_executions=1)
    whole = pack_trees([tree], 10**9)
    chunked = pack_trees([tree], 8)
    assert chunked[0].chunk_tokens is not None and chunked[0].num_tokens > 8
    for batches in (whole, chunked):
        model64.zero_grad(set_to_none=True)
        stats = microbatch_backward(model64, batches[0], LossConfig(), StepConfig(attention_backend="dense"))
        assert stats["loss"] == 0.0 and stats["policy_tokens"] == 0.0
        assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in model64.parameters())


@pytest.mark.gpu
def test_a_long_tree_on_cuda_trains_in_chunks_as_it_trains_whole(tiny_model_path):
    """A long agentic execution (tens of thousands of tokens, sub-agents and retries) on CUDA: trained in
    16K-token chunks through flex_attention it has the whole tree's gradients, in a fraction of the memory."""
    spec = WorkloadSpec(turns=160, system_tokens=200, task_tokens=300, response_tokens=(60, 200),
                        tool_tokens=(80, 300), retry_prob=0.1, subagents=2, subagent_turns=12)
    tree = build_tree(synthetic_execution("long", spec, 5).calls)
    assert tree.num_tokens > 50_000 and tree.num_paths > 2
    assign_loss_weights(tree, 1.0, num_executions=1)
    model = load_model(tiny_model_path, device="cuda", dtype="float32")
    model.train()
    peaks = {}
    for name, chunk in (("whole", 10**9), ("chunked", 16_384)):
        torch.cuda.reset_peak_memory_stats()
        peaks[name] = (train(model, pack_trees([tree], chunk), LossConfig(), StepConfig(attention_backend="flex")),
                       torch.cuda.max_memory_allocated())
    (whole, whole_peak), (chunked, chunked_peak) = peaks["whole"], peaks["chunked"]
    assert sum(s["loss"] for s in chunked[0]) == pytest.approx(sum(s["loss"] for s in whole[0]), rel=1e-4)
    for name, grad in whole[1].items():
        error = float((chunked[1][name] - grad).abs().max() / grad.abs().max().clamp_min(1e-12))
        assert error <= 1e-3, f"{name}: relative gradient error {error:.2e}"
    print(f"tree {tree.num_tokens} tokens, {tree.num_paths} paths: peak {whole_peak / 2**30:.2f} GiB whole, "
          f"{chunked_peak / 2**30:.2f} GiB in 16K chunks")
    assert chunked_peak < whole_peak
