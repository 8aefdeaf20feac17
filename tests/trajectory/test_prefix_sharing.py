"""Trees of a micro-batch share their common prompt prefixes, and training on the merged sequence is exactly
training on each tree alone (loss and every gradient), with clipping active."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.protocol import CallRecord, Execution
from gyre.replica.step import StepConfig, microbatch_backward, proximal_logprobs
from gyre.trajectory import assign_loss_weights, build_tree, pack_trees
from gyre.trajectory.sharing import merge_trees, merged_positions, shareable_prefix
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

SPEC = WorkloadSpec(turns=3, system_tokens=6, task_tokens=5, response_tokens=(2, 5), tool_tokens=(1, 4),
                    retry_prob=0.5, subagents=1, subagent_turns=1, summary_every=2, vocab_size=2000)


@pytest.fixture(scope="module")
def model64(tiny_model_path):
    model = load_model(tiny_model_path, dtype="float64")
    model.train()
    return model


def with_prefix(execution: Execution, prefix: list[int]) -> Execution:
    execution = copy.deepcopy(execution)
    for call in execution.calls:
        call.prompt_ids = prefix + call.prompt_ids
    return execution


def same_prompt_samples(prefix: list[int], rng: np.random.Generator, count: int) -> list[Execution]:
    """Samples of one task whose first calls have the very same prompt: their first response tokens are
    predicted by one shared row (a row with several labels)."""
    executions = []
    for index in range(count):
        response = rng.integers(20, 2000, size=4).tolist()
        call = CallRecord(f"same{index}", f"same{index}:0", "main", list(prefix), response, [0.0] * 4, 0)
        follow = CallRecord(f"same{index}", f"same{index}:1", "main", prefix + response + [7, 8], [9, 10], [0.0, 0.0], 0)
        executions.append(Execution(f"same{index}", "task-same", "g-same", [call, follow]))
    return executions


def step_trees(seed: int) -> list:
    rng = np.random.default_rng(seed)
    system = rng.integers(20, 2000, size=12).tolist()
    tasks = [rng.integers(20, 2000, size=8).tolist() for _ in range(2)]
    executions = [with_prefix(synthetic_execution(f"e{i}", SPEC, seed * 10 + i), system + tasks[i % 2]) for i in range(4)]
    executions += same_prompt_samples(system + tasks[0], rng, 2)
    trees = []
    for execution in executions:
        tree = build_tree(execution.calls, execution.id)
        assign_loss_weights(tree, rng.normal(0, 1, tree.num_paths), num_executions=len(executions))
        trees.append(tree)
    return trees


def set_behaviour_near_model(model, trees, rng) -> None:
    for tree in trees:
        with torch.no_grad():
            logp = proximal_logprobs(model, [merge_trees([tree])], LossConfig(), StepConfig(attention_backend="dense"))[0]
        tree.behavior_logprob = tree.behavior_logprob.copy()
        tree.behavior_logprob[tree.edge_target] = (logp.numpy() + rng.normal(0, 0.3, logp.shape[0])).astype(np.float32)


def loss_and_grads(model, batches, backend):
    model.zero_grad(set_to_none=True)
    cfg = LossConfig(clip_low=0.1, clip_high=0.1)
    loss = sum(microbatch_backward(model, batch, cfg, StepConfig(attention_backend=backend))["loss"] for batch in batches)
    return loss, {name: p.grad.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("backend", ["dense", "block"])
def test_merged_micro_batch_equals_each_tree_alone(model64, backend):
    trees = step_trees(seed=3)
    set_behaviour_near_model(model64, trees, np.random.default_rng(0))
    merged = pack_trees(trees, 10**9)
    assert len(merged) == 1
    laid_end_to_end = sum(t.num_tokens for t in trees)
    # The system prompt is laid out once for all six trees, each task prompt once per group.
    assert merged[0].num_tokens <= laid_end_to_end - 5 * 12 - 2 * 8, (merged[0].num_tokens, laid_end_to_end)
    assert np.bincount(merged[0].edge_row).max() >= 2  # a shared row predicts the first token of two samples
    alone_loss, alone_grads = loss_and_grads(model64, [merge_trees([t]) for t in trees], backend)
    merged_loss, merged_grads = loss_and_grads(model64, merged, backend)
    assert abs(merged_loss - alone_loss) <= 1e-9 * max(1.0, abs(alone_loss))
    # The model's norms compute in float32 whatever the dtype: gradients agree to float32 rounding.
    for name, grad in alone_grads.items():
        assert torch.allclose(merged_grads[name], grad, rtol=1e-6, atol=1e-8), name


def test_merged_layout_keeps_every_token_and_ancestry():
    trees = step_trees(seed=5) + sub_agent_trees(seed=5)
    batch = merge_trees(trees)
    # Each tree's root-to-leaf token sequences (ids by depth) are found unchanged in the merged layout.
    for tree, position in zip(trees, merged_positions(trees)):
        assert np.array_equal(batch.ids[position], tree.ids) and np.array_equal(batch.depth[position], tree.depth)
        assert np.array_equal(batch.is_policy[position], tree.is_policy)
        for path in range(tree.num_paths):
            leaf = position[tree.leaves[path]]
            ancestors = np.flatnonzero((np.arange(batch.num_tokens) <= leaf) & (batch.subtree_end > leaf))
            assert np.array_equal(batch.ids[ancestors], tree.ids[tree.path_indices(path)])


def sub_agent_trees(seed: int, count: int = 4) -> list:
    """Executions whose sub-agents open with their own system prompt: each tree forks after its first token,
    so its leading run of shared context is one token, while both prompts are shared with the other trees."""
    rng = np.random.default_rng(seed)
    main_system, sub_system = (rng.integers(20, 2000, size=n).tolist() for n in (12, 9))
    executions = []
    for i in range(count):
        execution = synthetic_execution(f"s{i}", SPEC, seed * 10 + i)
        for call in execution.calls:
            call.prompt_ids = [1] + (sub_system if call.agent == "sub" else main_system) + call.prompt_ids
        executions.append(execution)
    trees = []
    for execution in executions:
        tree = build_tree(execution.calls, execution.id)
        assign_loss_weights(tree, rng.normal(0, 1, tree.num_paths), num_executions=count)
        trees.append(tree)
    return trees


@pytest.mark.parametrize("backend", ["dense", "block"])
def test_sub_agent_prompts_are_shared_across_trees_exactly(model64, backend):
    trees = sub_agent_trees(seed=11)
    assert all(shareable_prefix(tree) == 1 for tree in trees)  # the leading run alone would share one token
    set_behaviour_near_model(model64, trees, np.random.default_rng(1))
    merged = pack_trees(trees, 10**9)
    assert len(merged) == 1
    # Both system prompts are laid out once for the four trees.
    assert merged[0].num_tokens <= sum(t.num_tokens for t in trees) - 3 * (1 + 12 + 9), merged[0].num_tokens
    alone_loss, alone_grads = loss_and_grads(model64, [merge_trees([t]) for t in trees], backend)
    merged_loss, merged_grads = loss_and_grads(model64, merged, backend)
    assert abs(merged_loss - alone_loss) <= 1e-9 * max(1.0, abs(alone_loss))
    for name, grad in alone_grads.items():
        assert torch.allclose(merged_grads[name], grad, rtol=1e-6, atol=1e-8), name


def test_sharing_fits_more_trees_per_micro_batch():
    trees = step_trees(seed=7)
    biggest, smallest = max(t.num_tokens for t in trees), min(t.num_tokens for t in trees)
    limit = biggest + smallest - 1  # no two trees fit laid end to end; sharing the 12-token system prompt, they do
    batches = pack_trees(trees, limit)
    assert len(batches) < len(trees)
    assert all(b.num_tokens <= limit for b in batches)
    assert sorted(e for b in batches for e in b.execution_ids) == sorted(t.execution_id for t in trees)
