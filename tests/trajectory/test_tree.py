"""Tree reconstruction from realistic call logs."""

from __future__ import annotations

import numpy as np
import pytest

from gyre.protocol import CallRecord
from gyre.trajectory import build_tree, prune_tree
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution


def call(cid: str, prompt: list[int], response: list[int], agent: str = "main", version: int = 0) -> CallRecord:
    return CallRecord("ex", cid, agent, prompt, response, [-0.1 * (i + 1) for i in range(len(response))], version)


def paths(tree) -> list[list[int]]:
    return [tree.ids[tree.path_indices(p)].tolist() for p in range(tree.num_paths)]


def check_invariants(tree) -> None:
    n = tree.num_tokens
    for k in range(n):
        p = tree.parent[k]
        if p >= 0:
            assert p < k and tree.depth[k] == tree.depth[p] + 1
            assert p < k < tree.subtree_end[p] and tree.subtree_end[k] <= tree.subtree_end[p]
        else:
            assert tree.depth[k] == 0
    assert (tree.subtree_end > np.arange(n)).all() and (tree.subtree_end <= n).all()


SYSTEM, TASK = [1, 2, 3], [4, 5]


def test_multi_turn_conversation_is_one_path():
    c1 = call("c1", SYSTEM + TASK, [10, 11])
    c2 = call("c2", c1.prompt_ids + c1.response_ids + [20, 21], [12, 13])
    c3 = call("c3", c2.prompt_ids + c2.response_ids + [22], [14])
    tree = build_tree([c1, c2, c3])
    check_invariants(tree)
    assert paths(tree) == [c3.prompt_ids + c3.response_ids]
    assert tree.num_tokens == tree.path_token_count() == 13
    policy = tree.ids[tree.is_policy].tolist()
    assert policy == [10, 11, 12, 13, 14]
    # behaviour log-probs travel with their tokens
    assert tree.behavior_logprob[tree.ids == 13][0] == pytest.approx(-0.2)


def test_retry_after_failed_tool_call_branches_at_the_prompt_end():
    c1 = call("c1", SYSTEM + TASK, [10, 11])
    bad = call("c2", c1.prompt_ids + c1.response_ids + [30], [99, 98])  # invalid tool call
    retry = call("c3", c1.prompt_ids + c1.response_ids + [30], [40, 41])  # same prompt, new response
    after = call("c4", retry.prompt_ids + retry.response_ids + [31], [42])
    tree = build_tree([c1, bad, retry, after])
    check_invariants(tree)
    assert sorted(paths(tree)) == sorted([bad.prompt_ids + bad.response_ids, after.prompt_ids + after.response_ids])
    # the shared prefix is stored once: prefix (8 tokens) + 2 + 4
    assert tree.num_tokens == 8 + 2 + 4
    branch_row = int(np.flatnonzero(tree.ids == 30)[0])
    children = np.flatnonzero(tree.parent == branch_row)
    assert sorted(tree.ids[children].tolist()) == [40, 99]


def test_sub_agent_interleaved_with_main_agent():
    m1 = call("m1", SYSTEM + TASK, [10])
    s1 = call("s1", [1, 7, 7] + [10], [50], agent="sub")  # different system prompt, shares token 1
    m2 = call("m2", m1.prompt_ids + m1.response_ids + [20], [11])
    s2 = call("s2", s1.prompt_ids + s1.response_ids + [60], [51], agent="sub")
    m3 = call("m3", m2.prompt_ids + m2.response_ids + [21], [12])
    tree = build_tree([m1, s1, m2, s2, m3])
    check_invariants(tree)
    assert tree.leaf_agent == ["main", "sub"]
    assert paths(tree) == [m3.prompt_ids + m3.response_ids, s2.prompt_ids + s2.response_ids]
    assert tree.num_tokens == len(m3.prompt_ids) + 1 + len(s2.prompt_ids) + 1 - 1  # token 1 shared


def test_context_rewrite_summary_restarts_the_prompt():
    m1 = call("m1", SYSTEM + TASK, [10, 11])
    m2 = call("m2", m1.prompt_ids + m1.response_ids + [20], [12])
    summary = call("s", m2.prompt_ids + m2.response_ids + [90, 91], [70, 71], agent="main-summary")
    restarted = call("m3", SYSTEM + TASK + [70, 71], [13])  # new context: summary in place of history
    tree = build_tree([m1, m2, summary, restarted])
    check_invariants(tree)
    assert sorted(tree.leaf_agent) == ["main", "main-summary"]
    restarted_path = paths(tree)[tree.leaf_agent.index("main")]
    assert restarted_path == restarted.prompt_ids + restarted.response_ids
    # In the restarted path, 70 and 71 are context (tool output-like); they were generated in another path
    # at another position, so they are not policy there.
    rows = tree.path_indices(tree.leaf_agent.index("main"))
    assert tree.is_policy[rows].tolist() == [False] * 5 + [False, False, True]


def test_position_that_is_policy_on_one_path_and_context_on_another_is_policy():
    generated = call("c1", SYSTEM, [10, 11])
    echoed = call("c2", SYSTEM + [10, 11, 12], [13])  # harness echoed the response as context
    tree = build_tree([echoed, generated])  # order must not matter
    ten = int(np.flatnonzero(tree.ids == 10)[0])
    assert tree.is_policy[ten] and tree.behavior_logprob[ten] == pytest.approx(-0.1)


def test_prune_keeps_only_the_chosen_paths_and_stays_consistent():
    execution = synthetic_execution("ex", WorkloadSpec(turns=6, summary_every=3), seed=3)
    tree = build_tree(execution.calls)
    assert tree.num_paths > 3
    keep = [0, 2, tree.num_paths - 1]
    pruned = prune_tree(tree, keep)
    check_invariants(pruned)
    assert paths(pruned) == [paths(tree)[p] for p in keep]
    assert pruned.leaf_agent == [tree.leaf_agent[p] for p in keep]
    for p, original in enumerate(keep):
        assert pruned.is_policy[pruned.path_indices(p)].tolist() == tree.is_policy[tree.path_indices(original)].tolist()


def test_calls_from_another_execution_are_rejected():
    other = CallRecord("other", "x", "main", [1], [2], [-1.0], 0)
    with pytest.raises(ValueError, match="belongs to execution 'other'"):
        build_tree([call("c1", [1], [2]), other])


def test_bad_call_records_name_the_problem():
    with pytest.raises(ValueError, match="agent must be one of"):
        CallRecord("ex", "c", "helper", [1], [2], [-1.0], 0)
    with pytest.raises(ValueError, match="2 response ids but 1 log-probs"):
        CallRecord("ex", "c", "main", [1], [2, 3], [-1.0], 0)
