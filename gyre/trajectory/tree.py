"""Merge an execution's calls into a prefix-shared token tree (a radix trie), flattened in DFS preorder.

Every call contributes one root-to-node sequence: ``prompt_ids + response_ids``. A later call whose prompt
extends an earlier prompt+response walks down the same nodes (the path continues); one whose prompt
diverges (retry, sub-agent, context rewrite) splits a node and opens a branch. Response tokens are policy
tokens carrying their behaviour log-prob and weight version; prompt tokens are context unless some other
call generated the very same token at the same position, in which case it stays a policy token.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gyre.protocol import AGENT_PRIORITY, CallRecord, TrajectoryTree


class _Node:
    """A run of tokens with a single child chain; branches only at its end."""

    __slots__ = ("tokens", "policy", "logprob", "version", "agent", "children", "end_agents")

    def __init__(self, tokens: np.ndarray, policy: np.ndarray, logprob: np.ndarray, version: np.ndarray, agent: np.ndarray):
        self.tokens = tokens
        self.policy = policy
        self.logprob = logprob
        self.version = version
        self.agent = agent
        self.children: dict[int, _Node] = {}
        # Roles of the calls whose sequence ends exactly at this node's last token.
        self.end_agents: list[str] = []

    def split(self, at: int) -> None:
        """Keep ``tokens[:at]`` here and move the rest into a single child."""
        tail = _Node(self.tokens[at:], self.policy[at:], self.logprob[at:], self.version[at:], self.agent[at:])
        tail.children, tail.end_agents = self.children, self.end_agents
        self.tokens, self.policy = self.tokens[:at], self.policy[:at]
        self.logprob, self.version, self.agent = self.logprob[:at], self.version[:at], self.agent[:at]
        self.children, self.end_agents = {int(tail.tokens[0]): tail}, []

    def merge_policy(self, offset: int, policy: np.ndarray, logprob: np.ndarray, version: np.ndarray, agent: np.ndarray) -> None:
        """Mark tokens that this sequence generated; the first recorded behaviour log-prob (and role) is kept."""
        span = slice(offset, offset + policy.shape[0])
        newly = policy & ~self.policy[span]
        if newly.any():
            self.policy[span] |= newly
            self.logprob[span] = np.where(newly, logprob, self.logprob[span])
            self.version[span] = np.where(newly, version, self.version[span])
            self.agent[span] = np.where(newly, agent, self.agent[span])


def _call_arrays(call: CallRecord) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n_prompt, n_resp = len(call.prompt_ids), len(call.response_ids)
    tokens = np.asarray(list(call.prompt_ids) + list(call.response_ids), dtype=np.int64)
    policy = np.zeros(n_prompt + n_resp, dtype=bool)
    policy[n_prompt:] = True
    logprob = np.zeros(n_prompt + n_resp, dtype=np.float32)
    logprob[n_prompt:] = np.asarray(call.response_logprobs, dtype=np.float32)
    version = np.full(n_prompt + n_resp, -1, dtype=np.int64)
    version[n_prompt:] = call.weight_version
    agent = np.full(n_prompt + n_resp, -1, dtype=np.int8)
    agent[n_prompt:] = AGENT_PRIORITY[call.agent]
    return tokens, policy, logprob, version, agent


def _insert(roots: dict[int, _Node], call: CallRecord) -> None:
    tokens, policy, logprob, version, agent = _call_arrays(call)
    children, pos, n = roots, 0, tokens.shape[0]
    node: _Node | None = None
    while pos < n:
        node = children.get(int(tokens[pos]))
        if node is None:
            node = _Node(tokens[pos:].copy(), policy[pos:].copy(), logprob[pos:].copy(), version[pos:].copy(), agent[pos:].copy())
            children[int(tokens[pos])] = node
            break
        span = min(node.tokens.shape[0], n - pos)
        mismatch = np.flatnonzero(node.tokens[:span] != tokens[pos : pos + span])
        common = int(mismatch[0]) if mismatch.size else span
        node.merge_policy(
            0, policy[pos : pos + common], logprob[pos : pos + common], version[pos : pos + common], agent[pos : pos + common]
        )
        if common < node.tokens.shape[0]:
            # Diverges (or ends) inside this node: split so the branch point is a node boundary.
            node.split(common)
        pos += common
        children = node.children
    assert node is not None
    node.end_agents.append(call.agent)


def build_tree(calls: Iterable[CallRecord], execution_id: str | None = None) -> TrajectoryTree:
    """The prefix-shared tree of one execution's calls, in DFS preorder with children in call order."""
    calls = list(calls)
    if not calls:
        raise ValueError(f"execution {execution_id!r} has no calls to build a tree from")
    execution_id = execution_id or calls[0].execution_id
    roots: dict[int, _Node] = {}
    for call in calls:
        if call.execution_id != execution_id:
            raise ValueError(
                f"call {call.call_id!r} belongs to execution {call.execution_id!r}, not {execution_id!r}"
            )
        _insert(roots, call)
    return _flatten(roots, execution_id)


def _flatten(roots: dict[int, _Node], execution_id: str) -> TrajectoryTree:
    chunks: dict[str, list[np.ndarray]] = {k: [] for k in ("ids", "policy", "logprob", "version", "agent")}
    depth_parts: list[np.ndarray] = []
    parent_parts: list[np.ndarray] = []
    node_spans: list[tuple[int, int, int]] = []  # (start, length, index of the parent node) per node
    leaves: list[int] = []
    leaf_agent: list[str] = []
    size = 0
    # Iterative DFS: (node, depth of its first token, preorder index of its parent token).
    stack: list[tuple[_Node, int, int, int]] = [(node, 0, -1, -1) for node in reversed(list(roots.values()))]
    while stack:
        node, depth0, parent, parent_node = stack.pop()
        length = node.tokens.shape[0]
        start = size
        chunks["ids"].append(node.tokens)
        chunks["policy"].append(node.policy)
        chunks["logprob"].append(node.logprob)
        chunks["version"].append(node.version)
        chunks["agent"].append(node.agent)
        depth_parts.append(np.arange(depth0, depth0 + length, dtype=np.int64))
        parents = np.arange(start - 1, start + length - 1, dtype=np.int64)
        parents[0] = parent
        parent_parts.append(parents)
        node_spans.append((start, length, parent_node))
        size += length
        last = start + length - 1
        if not node.children:
            leaves.append(last)
            leaf_agent.append(min(node.end_agents, key=AGENT_PRIORITY.__getitem__))
        for child in reversed(list(node.children.values())):
            stack.append((child, depth0 + length, last, len(node_spans) - 1))
    parent = np.concatenate(parent_parts)
    subtree_end = _subtree_end_of_nodes(node_spans)
    return TrajectoryTree(
        execution_id=execution_id,
        ids=np.concatenate(chunks["ids"]),
        depth=np.concatenate(depth_parts),
        subtree_end=subtree_end,
        parent=parent,
        is_policy=np.concatenate(chunks["policy"]),
        behavior_logprob=np.concatenate(chunks["logprob"]),
        weight_version=np.concatenate(chunks["version"]),
        token_agent=np.concatenate(chunks["agent"]),
        leaves=np.asarray(leaves, dtype=np.int64),
        leaf_agent=leaf_agent,
    )


def _subtree_end_of_nodes(node_spans: list[tuple[int, int, int]]) -> np.ndarray:
    """Per-token subtree ends. Every token of a node shares the node's subtree end, and in preorder every
    descendant follows its ancestor, so one backward pass over the nodes propagates the ends upwards."""
    ends = [start + length for start, length, _ in node_spans]
    for index in range(len(node_spans) - 1, -1, -1):
        parent_node = node_spans[index][2]
        if parent_node >= 0 and ends[index] > ends[parent_node]:
            ends[parent_node] = ends[index]
    lengths = np.fromiter((length for _, length, _ in node_spans), dtype=np.int64, count=len(node_spans))
    return np.repeat(np.asarray(ends, dtype=np.int64), lengths)


def prune_tree(tree: TrajectoryTree, keep_paths: Iterable[int]) -> TrajectoryTree:
    """The tree restricted to the kept root-to-leaf paths (preorder survives removing whole subtrees)."""
    keep_paths = sorted(set(int(p) for p in keep_paths))
    if not keep_paths:
        raise ValueError(f"execution {tree.execution_id!r}: pruning must keep at least one path")
    keep = np.zeros(tree.num_tokens, dtype=bool)
    for p in keep_paths:
        keep[tree.path_indices(p)] = True
    new_index = np.cumsum(keep) - 1  # old index -> new index, for kept tokens
    kept_before = np.concatenate([[0], np.cumsum(keep)])  # kept tokens strictly before an old index
    old_parent = tree.parent[keep]
    return TrajectoryTree(
        execution_id=tree.execution_id,
        ids=tree.ids[keep],
        depth=tree.depth[keep],
        subtree_end=kept_before[tree.subtree_end[keep]],
        parent=np.where(old_parent >= 0, new_index[np.maximum(old_parent, 0)], -1),
        is_policy=tree.is_policy[keep],
        behavior_logprob=tree.behavior_logprob[keep],
        weight_version=tree.weight_version[keep],
        token_agent=tree.token_agent[keep],
        leaves=new_index[tree.leaves[keep_paths]],
        leaf_agent=[tree.leaf_agent[p] for p in keep_paths],
    )
