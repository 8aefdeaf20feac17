"""Bounded path sampling, loss weights (two-level average) and micro-batch packing."""

from __future__ import annotations

import numpy as np
import pytest

from gyre.algo.advantages import compute_advantages
from gyre.protocol import CallRecord, Execution
from gyre.trajectory import (
    assign_loss_weights,
    build_tree,
    pack_trees,
    select_paths,
)
from gyre.trajectory.processor import TrajectoryConfig, process_executions
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution
from gyre.trajectory.weights import path_token_weights


def branching_tree(n_main: int, n_sub: int, n_summary: int = 0):
    calls, prompt = [], [1, 2, 3]
    for i in range(n_main):
        calls.append(CallRecord("ex", f"m{i}", "main", prompt + [100 + i], [200 + i] * (i + 1), [-1.0] * (i + 1), 0))
    for i in range(n_sub):
        calls.append(CallRecord("ex", f"s{i}", "sub", [1, 9, 300 + i], [400 + i] * 5, [-1.0] * 5, 0))
    for i in range(n_summary):
        calls.append(CallRecord("ex", f"y{i}", "main-summary", prompt + [500 + i], [600 + i] * 3, [-1.0] * 3, 0))
    return build_tree(calls)


def test_cap_prefers_main_agent_paths():
    tree = branching_tree(n_main=6, n_sub=4, n_summary=2)
    keep = select_paths(tree, 5, np.random.default_rng(0))
    assert len(keep) == 5 and all(tree.leaf_agent[p] == "main" for p in keep)
    keep = select_paths(branching_tree(n_main=2, n_sub=4, n_summary=2), 5, np.random.default_rng(0))
    agents = sorted(branching_tree(2, 4, 2).leaf_agent[p] for p in keep)
    assert agents == ["main", "main", "main-summary", "main-summary", "sub"]


def test_cap_samples_in_proportion_to_new_policy_tokens():
    tree = branching_tree(n_main=4, n_sub=0)  # main path i adds i+1 policy tokens
    counts = np.zeros(4)
    for seed in range(4000):
        counts[select_paths(tree, 1, np.random.default_rng(seed))[0]] += 1
    expected = np.array([1, 2, 3, 4]) / 10
    assert np.allclose(counts / counts.sum(), expected, atol=0.03)


def test_cap_is_deterministic_given_a_seed_and_none_means_uncapped():
    tree = build_tree(synthetic_execution("ex", WorkloadSpec(turns=10, retry_prob=0.5), seed=1).calls)
    assert tree.num_paths > 5
    a = select_paths(tree, 5, np.random.default_rng(42))
    b = select_paths(tree, 5, np.random.default_rng(42))
    assert a == b and len(a) == 5
    assert select_paths(tree, None, np.random.default_rng(0)) == list(range(tree.num_paths))
    with pytest.raises(ValueError, match="max_paths"):
        select_paths(tree, 0, np.random.default_rng(0))


def test_shared_tokens_count_once_and_executions_average_first():
    trees = [build_tree(synthetic_execution(f"e{i}", WorkloadSpec(turns=5), seed=i).calls) for i in range(3)]
    for tree in trees:
        assign_loss_weights(tree, 1.0, num_executions=3)
        # every unique trainable token weighs 1 / (E * N_e): sum over an execution = 1 / E
        assert np.allclose(tree.w_tok, tree.w_tok[0])
        assert tree.w_tok.sum() == pytest.approx(1 / 3)
        assert tree.edge_target.shape[0] == (tree.is_policy & (tree.parent >= 0)).sum()


def test_edge_weights_are_sums_of_path_weights_split_by_sign():
    tree = build_tree(synthetic_execution("e", WorkloadSpec(turns=6, retry_prob=0.6), seed=4).calls)
    advantages = np.linspace(-1, 1, tree.num_paths)
    for aggregation in ("execution_token_mean", "path_token_mean"):
        assign_loss_weights(tree, advantages, num_executions=2, aggregation=aggregation)
        plus, minus, tok = (np.zeros(tree.num_tokens) for _ in range(3))
        for p, a in enumerate(advantages):
            rows, coef = path_token_weights(tree, p, num_executions=2, aggregation=aggregation)
            plus[rows] += coef * max(a, 0)
            minus[rows] += coef * min(a, 0)
            tok[rows] += coef
        assert np.allclose(tree.w_plus, plus[tree.edge_target])
        assert np.allclose(tree.w_minus, minus[tree.edge_target])
        assert np.allclose(tree.w_tok, tok[tree.edge_target])
        assert (tree.w_plus >= 0).all() and (tree.w_minus <= 0).all()


def test_a_row_with_several_children_carries_several_labels():
    tree = branching_tree(n_main=3, n_sub=0)
    assign_loss_weights(tree, 1.0, num_executions=1)
    row_of_100 = int(np.flatnonzero(tree.ids == 100)[0])
    labels = tree.edge_label[tree.edge_row == row_of_100 - 1]
    assert labels.tolist() == []  # 100..102 are prompt tokens: context, no label
    branch = np.flatnonzero(tree.ids == 3)[0]
    children = tree.ids[tree.parent == branch]
    assert sorted(children.tolist()) == [100, 101, 102]


def test_advantages_grpo_and_rloo():
    rewards, groups = [1.0, 0.0, 0.5, 1.0, 1.0], ["a", "a", "a", "b", "c"]
    grpo = compute_advantages(rewards, groups)
    assert np.allclose(grpo, [0.5, -0.5, 0.0, 0.0, 0.0])
    assert np.allclose(compute_advantages(rewards, groups, norm_std=True)[:3], [1.0, -1.0, 0.0], atol=1e-5)
    assert np.allclose(compute_advantages(rewards, groups, estimator="rloo")[:3], [0.75, -0.75, 0.0])
    with pytest.raises(ValueError, match="adv_estimator"):
        compute_advantages(rewards, groups, estimator="ppo")


def test_packing_first_fit_decreasing_and_no_truncation():
    trees = [build_tree(synthetic_execution(f"e{i}", WorkloadSpec(turns=2 + i), seed=i).calls) for i in range(5)]
    for tree in trees:
        assign_loss_weights(tree, 1.0, num_executions=5)
    limit = 2 * max(t.num_tokens for t in trees)
    batches = pack_trees(trees, limit)
    assert sorted(e for b in batches for e in b.execution_ids) == sorted(t.execution_id for t in trees)
    assert all(b.num_tokens <= limit and b.chunk_tokens is None for b in batches)
    assert len(batches) < len(trees)
    for batch in batches:  # indices are offset into the packed sequence and stay within each tree
        for start, end in zip(batch.tree_ptr[:-1], batch.tree_ptr[1:]):
            inside = (batch.edge_row >= start) & (batch.edge_row < end)
            assert (batch.subtree_end[start:end] <= end).all() and (batch.depth[start] == 0)
            assert ((batch.edge_target[inside] > start) & (batch.edge_target[inside] < end)).all()


def test_a_tree_longer_than_a_micro_batch_is_chunked_whole_and_small_trees_still_share():
    specs = [WorkloadSpec(turns=12)] + [WorkloadSpec(turns=2, subagents=0, retry_prob=0.0)] * 3
    trees = [build_tree(synthetic_execution(f"e{i}", spec, seed=i).calls) for i, spec in enumerate(specs)]
    for tree in trees:
        assign_loss_weights(tree, 1.0, num_executions=4)
    longest, *small = sorted(trees, key=lambda t: t.num_tokens, reverse=True)
    limit = longest.num_tokens - 1
    assert sum(t.num_tokens for t in small) <= limit, "the small trees must fit one micro-batch for this test"
    batches = pack_trees(trees, limit)
    assert len(batches) == 2
    chunked, shared = batches
    # The long tree: one work item (one replica trains all its chunks), whole, never truncated.
    assert chunked.execution_ids == [longest.execution_id] and chunked.chunk_tokens == limit
    assert chunked.num_tokens == longest.num_tokens and np.array_equal(chunked.ids, longest.ids)
    assert np.array_equal(chunked.edge_target, longest.edge_target)
    assert sorted(shared.execution_ids) == sorted(t.execution_id for t in small) and shared.chunk_tokens is None
    with pytest.raises(ValueError, match="max_tokens_per_microbatch must be >= 1"):
        pack_trees(trees, 0)


def test_process_executions_caps_paths_and_weights_whole_step():
    executions = [synthetic_execution(f"e{i}", WorkloadSpec(turns=8, retry_prob=0.5), seed=i, group="g") for i in range(4)]
    trees = process_executions(executions, TrajectoryConfig(max_paths=2))
    assert all(tree.num_paths <= 2 for tree in trees)
    assert sum(tree.w_tok.sum() for tree in trees) == pytest.approx(1.0)
    again = process_executions(executions, TrajectoryConfig(max_paths=2))
    assert [t.ids.tolist() for t in trees] == [t.ids.tolist() for t in again]


def summarised_execution() -> list[CallRecord]:
    """Three main turns (3 tokens each), a summary call condensing them, one main turn after the rewrite."""
    system, task, tool = [1, 2, 3, 4], [10, 11, 12], [50]
    calls, prompt = [], system + task
    for turn in range(3):
        response = [100 + 10 * turn + k for k in range(3)]
        calls.append(CallRecord("ex", f"m{turn}", "main", list(prompt), response, [-1.0] * 3, 0))
        prompt = prompt + response + tool
    calls.append(CallRecord("ex", "sum", "main-summary", prompt + [60, 61], [70, 71, 72, 73], [-1.0] * 4, 0))
    calls.append(CallRecord("ex", "m3", "main", system + [20, 21, 70, 71, 72, 73], [90], [-1.0], 0))
    return calls


def test_bounded_sampling_keeps_the_main_turns_that_lie_on_a_summary_path():
    """The main agent's 9 tokens before a context rewrite lie only on the path that ends in the summary
    call; ranking paths by their last call would keep the 1-token post-summary path instead."""
    tree = build_tree(summarised_execution())
    assert sorted(tree.leaf_agent) == ["main", "main-summary"]
    summary_path = tree.leaf_agent.index("main-summary")
    main_tokens = tree.is_policy & (tree.token_agent == 0)
    on_summary_path = int(main_tokens[tree.path_indices(summary_path)].sum())
    assert on_summary_path == 9 and int(main_tokens.sum()) == 10
    kept = [select_paths(tree, 1, np.random.default_rng(seed)) for seed in range(200)]
    share = sum(choice == [summary_path] for choice in kept) / len(kept)
    assert share > 0.8, share  # drawn by main tokens added: 9 against 1


def test_executions_without_calls_are_left_out_of_training_and_of_the_baseline():
    def execution(name: str, reward: float, calls: bool):
        record = CallRecord(name, f"{name}:0", "main", [1, 2, 3], [7, 8], [-1.0, -1.0], 0)
        return Execution(name, "task", "g", [record] if calls else [], reward=reward)

    executions = [execution("a", 1.0, True), execution("b", 0.5, True), execution("c", 0.0, False)]
    trees = process_executions(executions, TrajectoryConfig(max_paths=None))
    assert [t.execution_id for t in trees] == ["a", "b"]
    # execution_token_mean over 2 executions: the weights of an execution's tokens add up to A / 2.
    advantages = [2 * float(t.w_plus.sum() + t.w_minus.sum()) for t in trees]
    assert advantages == pytest.approx([0.25, -0.25])


def test_shuffled_rewards_keep_the_rewards_and_lose_the_signal():
    executions = [synthetic_execution(f"e{i}", WorkloadSpec(turns=2), seed=i, group=f"g{i // 4}") for i in range(8)]
    for i, execution in enumerate(executions):
        execution.reward = 1.0 if i % 4 == 0 else 0.0  # one success per group
    plain = process_executions(executions, TrajectoryConfig(max_paths=None))
    shuffled = process_executions(executions, TrajectoryConfig(max_paths=None, shuffle_rewards=True))
    again = process_executions(list(reversed(executions)), TrajectoryConfig(max_paths=None, shuffle_rewards=True))

    def advantage(tree):
        return round(8 * float(tree.w_plus.sum() + tree.w_minus.sum()), 9)

    by_id = {t.execution_id: advantage(t) for t in shuffled}
    assert by_id == {t.execution_id: advantage(t) for t in again}  # seeded by the step, not by order
    assert by_id != {t.execution_id: advantage(t) for t in plain}
    assert abs(sum(by_id.values())) < 1e-9  # still centred within groups
