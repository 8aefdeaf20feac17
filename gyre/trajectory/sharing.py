"""Trees of one micro-batch share their common prompt prefixes: each shared token is computed once.

The executions of a step mostly open with the same tokens: every execution repeats the harness's system
prompt and tool list, and the samples of one task (a GRPO group) repeat the whole task prompt. Within a
tree, prefixes of calls are already shared; `merge_trees` extends that across trees: the *shareable
prefix* of each tree (its leading run of context tokens that every other token of the tree descends
from) goes into a trie, each distinct prefix token is laid out once, and each tree's remaining tokens hang
below the last token of its prefix. Every token keeps its position id (its depth) and sees exactly the
ancestors it saw in its own tree, and every edge keeps its label and weights, so the loss and gradients
are exactly those of the trees laid end to end. Only context tokens are merged: policy tokens carry
their own behaviour log-probs, versions and weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gyre.protocol import PackedBatch, TrajectoryTree


def shareable_prefix(tree: TrajectoryTree) -> int:
    """Length of the leading run of context tokens that are ancestors of every token of the tree."""
    n = tree.num_tokens
    breaks = np.flatnonzero((tree.subtree_end != n) | tree.is_policy)
    return int(breaks[0]) if breaks.size else n


def prefix_key(tree: TrajectoryTree) -> bytes:
    """Orders trees so that those sharing prefixes are adjacent (any byte order keeps common prefixes together)."""
    return tree.ids[: shareable_prefix(tree)].astype(">i8").tobytes()


def common_length(a: np.ndarray, b: np.ndarray) -> int:
    size = min(a.shape[0], b.shape[0])
    differ = np.flatnonzero(a[:size] != b[:size])
    return int(differ[0]) if differ.size else size


def merge_trees(trees: Sequence[TrajectoryTree], chunk_tokens: int | None = None) -> PackedBatch:
    """One sequence holding ``trees``, their shareable prefixes laid out once (see the module docstring)."""
    prefixes = [tree.ids[: shareable_prefix(tree)] for tree in trees]
    layout = _Layout(trees, prefixes)
    layout.emit(list(range(len(trees))), 0)
    return layout.batch(chunk_tokens)


class _Layout:
    """Builds the merged arrays in preorder: shared prefix tokens (trie), then each tree's own tokens."""

    def __init__(self, trees: Sequence[TrajectoryTree], prefixes: list[np.ndarray]) -> None:
        self.trees = trees
        self.prefixes = prefixes
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ids", "depth", "subtree_end")}
        self.size = 0
        self.prefix_pos = [np.zeros(p.shape[0], dtype=np.int64) for p in prefixes]  # prefix token -> merged index
        self.own_start = np.zeros(len(trees), dtype=np.int64)  # where each tree's own tokens begin

    def emit(self, members: list[int], depth: int) -> None:
        """Lay out ``members``: trees whose prefixes agree on their first ``depth`` tokens (laid out already)."""
        first = self.prefixes[members[0]]
        shared = min(self.prefixes[i].shape[0] for i in members)
        for i in members[1:]:
            shared = min(shared, common_length(first, self.prefixes[i]))
        span = None
        if shared > depth:
            start = self.size
            span = self._append(first[depth:shared], np.arange(depth, shared))
            for i in members:
                self.prefix_pos[i][depth:shared] = np.arange(start, self.size)
        for i in members:
            if self.prefixes[i].shape[0] == shared:
                self._append_own(i)
        groups: dict[int, list[int]] = {}
        for i in members:
            if self.prefixes[i].shape[0] > shared:
                groups.setdefault(int(self.prefixes[i][shared]), []).append(i)
        for group in groups.values():
            self.emit(group, shared)
        if span is not None:
            self.parts["subtree_end"][span][:] = self.size  # everything laid out below the span descends from it

    def _append(self, ids: np.ndarray, depth: np.ndarray) -> int:
        """Add a run of tokens; returns its part index."""
        self.parts["ids"].append(np.asarray(ids, dtype=np.int64))
        self.parts["depth"].append(np.asarray(depth, dtype=np.int64))
        self.parts["subtree_end"].append(np.zeros(len(ids), dtype=np.int64))
        self.size += len(ids)
        return len(self.parts["ids"]) - 1

    def _append_own(self, i: int) -> None:
        tree, cut = self.trees[i], self.prefixes[i].shape[0]
        offset = self.size - cut
        self.own_start[i] = self.size
        if tree.num_tokens == cut:
            return
        part = self._append(tree.ids[cut:], tree.depth[cut:])
        self.parts["subtree_end"][part][:] = tree.subtree_end[cut:] + offset

    def map_index(self, i: int, index: np.ndarray, offset: int) -> np.ndarray:
        """Tree ``i``'s token indices in the merged layout (prefix tokens via the trie, own tokens shifted)."""
        cut = self.prefixes[i].shape[0]
        inside = (index >= 0) & (index < cut)
        mapped = np.where(index >= cut, index + offset, index)
        mapped[inside] = self.prefix_pos[i][index[inside]]
        return mapped

    def batch(self, chunk_tokens: int | None) -> PackedBatch:
        trees = self.trees
        n = self.size
        own = [slice(int(self.own_start[i]), int(self.own_start[i]) + t.num_tokens - self.prefixes[i].shape[0]) for i, t in enumerate(trees)]

        def spread(name: str, fill: float | int | bool, dtype: type) -> np.ndarray:
            out = np.full(n, fill, dtype=dtype)
            for i, tree in enumerate(trees):
                out[own[i]] = getattr(tree, name)[self.prefixes[i].shape[0] :]
            return out

        def edges(name: str) -> np.ndarray:
            parts = [self.map_index(i, getattr(t, name), int(self.own_start[i]) - self.prefixes[i].shape[0]) for i, t in enumerate(trees)]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(t, name) for t in trees]) if trees else np.zeros(0)

        return PackedBatch(
            execution_ids=[tree.execution_id for tree in trees],
            ids=np.concatenate(self.parts["ids"]) if self.parts["ids"] else np.zeros(0, dtype=np.int64),
            depth=np.concatenate(self.parts["depth"]) if self.parts["depth"] else np.zeros(0, dtype=np.int64),
            subtree_end=np.concatenate(self.parts["subtree_end"]) if self.parts["subtree_end"] else np.zeros(0, dtype=np.int64),
            is_policy=spread("is_policy", False, bool),
            behavior_logprob=spread("behavior_logprob", 0.0, np.float32),
            weight_version=spread("weight_version", -1, np.int64),
            tree_ptr=np.append(self.own_start, n),
            edge_row=edges("edge_row"),
            edge_label=cat("edge_label"),
            edge_target=edges("edge_target"),
            w_plus=cat("w_plus"),
            w_minus=cat("w_minus"),
            w_tok=cat("w_tok"),
            path_tokens=sum(tree.path_token_count() for tree in trees),
            chunk_tokens=chunk_tokens,
        )


def drop_prefix(tree: TrajectoryTree, length: int) -> TrajectoryTree:
    """The tree without its first ``length`` tokens, which must lie in its shareable prefix (a run of context
    every token descends from): positions restart at 0. Used to train on the part of a conversation after
    a long common context (edges whose predicting row is cut away are dropped)."""
    from dataclasses import replace

    if not 0 <= length <= shareable_prefix(tree) or length >= tree.num_tokens:
        raise ValueError(f"execution {tree.execution_id!r}: cannot drop {length} tokens; its shareable prefix is "
                         f"{shareable_prefix(tree)} of {tree.num_tokens}")
    kept = tree.edge_row >= length
    return replace(
        tree,
        ids=tree.ids[length:], depth=tree.depth[length:] - length, subtree_end=tree.subtree_end[length:] - length,
        parent=np.maximum(tree.parent[length:] - length, -1), is_policy=tree.is_policy[length:],
        behavior_logprob=tree.behavior_logprob[length:], weight_version=tree.weight_version[length:],
        token_agent=tree.token_agent[length:], leaves=tree.leaves - length,
        edge_row=tree.edge_row[kept] - length, edge_label=tree.edge_label[kept], edge_target=tree.edge_target[kept] - length,
        w_plus=tree.w_plus[kept], w_minus=tree.w_minus[kept], w_tok=tree.w_tok[kept],
    )


def common_prefix_length(trees: Sequence[TrajectoryTree]) -> int:
    """Length of the shareable prefix every tree of ``trees`` starts with (0 if they differ at once)."""
    if not trees:
        return 0
    first = trees[0].ids[: shareable_prefix(trees[0])]
    length = first.shape[0]
    for tree in trees[1:]:
        length = min(length, common_length(first[:length], tree.ids[: shareable_prefix(tree)]))
    return length
