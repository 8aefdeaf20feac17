"""Trees of one micro-batch share their common prompts: each shared token is computed once.

The executions of a step mostly open with the same tokens: every execution repeats the harness's system
prompt and tool list, every sub-agent its own, and the samples of one task (a GRPO group) repeat the whole
task prompt. Within a tree, prefixes of calls are already shared; `merge_trees` extends that across trees.
The *crown* of a tree is its context tokens that have no generated token above them: the system prompts,
tool lists and task texts of its conversations (a main agent and its sub-agents open separate branches of
it). The crowns of a micro-batch's trees go into one trie, each distinct crown token is laid out once, and
each tree's remaining tokens (every subtree below its crown) hang below the same crown token as in the
tree. Every token keeps its position id (its depth) and sees exactly the ancestors it saw in its own tree,
and every edge keeps its label and weights, so the loss and gradients are exactly those of the trees laid
end to end. Only context tokens are merged: policy tokens carry their own behaviour log-probs, versions and
weights.

Why crowns rather than one leading run: with sub-agents a tree forks after a few tokens (the conversations
differ in their system prompts), so its leading run of shared context is a handful of tokens and each tree
would carry both prompts again; the crown holds both.
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


def crown(tree: TrajectoryTree) -> np.ndarray:
    """Mask of the tree's crown: context tokens none of whose ancestors (nor themselves) is a policy token."""
    n = tree.num_tokens
    policy = tree.is_policy.astype(np.int64)
    # Policy tokens among each token's ancestors-or-self: token k adds 1 on its subtree range [k, subtree_end[k]).
    diff = np.bincount(np.arange(n), weights=policy, minlength=n + 1) - np.bincount(tree.subtree_end, weights=policy, minlength=n + 1)
    return np.cumsum(diff)[:n] == 0


class CrownTrie:
    """The crown tokens of several trees, merged: a node per distinct (parent node, token id) from the root."""

    def __init__(self) -> None:
        self.index: dict[tuple[int, int], int] = {}  # (parent node or -1, token id) -> node
        self.ids: list[int] = []
        self.depth: list[int] = []
        self.children: list[list[int]] = []
        self.roots: list[int] = []

    def __len__(self) -> int:
        return len(self.ids)

    def new_tokens(self, tree: TrajectoryTree, mask: np.ndarray) -> int:
        """How many nodes adding ``tree``'s crown (``mask``) would create."""
        known: dict[int, int] = {}  # crown token -> node, while the path exists in the trie
        new = 0
        for k in np.flatnonzero(mask).tolist():
            parent = int(tree.parent[k])
            node = self.index.get((known[parent] if parent >= 0 else -1, int(tree.ids[k]))) if parent < 0 or parent in known else None
            if node is None:
                new += 1
            else:
                known[k] = node
        return new

    def add(self, tree: TrajectoryTree, mask: np.ndarray) -> np.ndarray:
        """Insert ``tree``'s crown; returns each token's node (-1 outside the crown)."""
        nodes = np.full(tree.num_tokens, -1, dtype=np.int64)
        for k in np.flatnonzero(mask).tolist():
            parent = int(tree.parent[k])
            parent_node = int(nodes[parent]) if parent >= 0 else -1
            key = (parent_node, int(tree.ids[k]))
            node = self.index.get(key)
            if node is None:
                node = len(self.ids)
                self.index[key] = node
                self.ids.append(key[1])
                self.depth.append(int(tree.depth[k]))
                self.children.append([])
                (self.children[parent_node] if parent_node >= 0 else self.roots).append(node)
            nodes[k] = node
        return nodes


def merged_size(trees: Sequence[TrajectoryTree]) -> int:
    """Tokens of `merge_trees(trees)` (without laying it out)."""
    trie = CrownTrie()
    own = 0
    for tree in trees:
        mask = crown(tree)
        trie.add(tree, mask)
        own += int((~mask).sum())
    return len(trie) + own


def merge_trees(trees: Sequence[TrajectoryTree], chunk_tokens: int | None = None) -> PackedBatch:
    """One sequence holding ``trees``, their crowns laid out once (see the module docstring)."""
    return _Layout(trees).batch(chunk_tokens)


def merged_positions(trees: Sequence[TrajectoryTree]) -> list[np.ndarray]:
    """Where each token of each tree lies in `merge_trees(trees)`."""
    layout = _Layout(trees)
    return [layout.map_index(i, np.arange(tree.num_tokens)) for i, tree in enumerate(trees)]


class _Layout:
    """The merged arrays in preorder: each crown node, then its crown children, then the trees' own subtrees
    that hang below it."""

    def __init__(self, trees: Sequence[TrajectoryTree]) -> None:
        self.trees = trees
        trie = CrownTrie()
        masks = [crown(tree) for tree in trees]
        nodes = [trie.add(tree, mask) for tree, mask in zip(trees, masks)]
        # Own subtrees: maximal subtrees outside the crown, each a contiguous preorder range below a crown node
        # (or at the top, for a tree that opens with a generated token).
        hang: dict[int, list[tuple[int, int]]] = {}
        for i, (tree, mask) in enumerate(zip(trees, masks)):
            parent = tree.parent
            roots = np.flatnonzero(~mask & ((parent < 0) | mask[np.maximum(parent, 0)]))
            for r in roots.tolist():
                hang.setdefault(int(nodes[i][parent[r]]) if parent[r] >= 0 else -1, []).append((i, r))
        self.node_pos = np.zeros(len(trie), dtype=np.int64)
        self.own_pos: list[np.ndarray] = [np.full(t.num_tokens, -1, dtype=np.int64) for t in trees]
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("ids", "depth", "subtree_end", "source", "index")}
        size = 0
        ends: list[tuple[int, int]] = []  # (position of a crown node, its subtree's end)

        def own(i: int, r: int) -> None:
            nonlocal size
            tree = self.trees[i]
            end = int(tree.subtree_end[r])
            self.own_pos[i][r:end] = np.arange(size, size + end - r)
            parts["ids"].append(tree.ids[r:end])
            parts["depth"].append(tree.depth[r:end])
            parts["subtree_end"].append(tree.subtree_end[r:end] - r + size)
            parts["source"].append(np.full(end - r, i, dtype=np.int64))
            parts["index"].append(np.arange(r, end, dtype=np.int64))
            size += end - r

        # Iterative preorder over the trie: ("node", n) lays out a crown node and schedules its end.
        stack: list[tuple[str, int]] = [("own", -1)] + [("node", n) for n in reversed(trie.roots)]
        while stack:
            kind, value = stack.pop()
            if kind == "node":
                self.node_pos[value] = size
                parts["ids"].append(np.asarray([trie.ids[value]], dtype=np.int64))
                parts["depth"].append(np.asarray([trie.depth[value]], dtype=np.int64))
                parts["subtree_end"].append(np.zeros(1, dtype=np.int64))  # set when its subtree is laid out
                parts["source"].append(np.asarray([-1], dtype=np.int64))
                parts["index"].append(np.asarray([len(ends)], dtype=np.int64))
                ends.append((size, -1))
                size += 1
                stack.append(("end", len(ends) - 1))
                stack.append(("own", value))
                stack.extend(("node", child) for child in reversed(trie.children[value]))
            elif kind == "own":
                for i, r in hang.get(value, []):
                    own(i, r)
            else:
                ends[value] = (ends[value][0], size)
        self.size = size
        cat = {k: (np.concatenate(v) if v else np.zeros(0, dtype=np.int64)) for k, v in parts.items()}
        crown_tok = cat["source"] < 0
        cat["subtree_end"][crown_tok] = np.asarray([end for _, end in ends], dtype=np.int64)[cat["index"][crown_tok]]
        self.cat = cat
        self.nodes = nodes

    def map_index(self, i: int, index: np.ndarray) -> np.ndarray:
        """Tree ``i``'s token indices in the merged layout (crown tokens via the trie, the rest as laid out)."""
        index = np.asarray(index, dtype=np.int64)
        node = self.nodes[i][index]
        return np.where(node >= 0, self.node_pos[np.maximum(node, 0)], self.own_pos[i][index])

    def batch(self, chunk_tokens: int | None) -> PackedBatch:
        trees, cat, n = self.trees, self.cat, self.size
        source, index = cat["source"], cat["index"]

        def spread(name: str, fill: float | int | bool, dtype: type) -> np.ndarray:
            out = np.full(n, fill, dtype=dtype)
            for i, tree in enumerate(trees):
                at = source == i
                out[at] = getattr(tree, name)[index[at]]
            return out

        def edges(name: str) -> np.ndarray:
            parts = [self.map_index(i, getattr(t, name)) for i, t in enumerate(trees)]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        def cat_edges(name: str) -> np.ndarray:
            return np.concatenate([getattr(t, name) for t in trees]) if trees else np.zeros(0)

        # Where each tree's own tokens start: its first token that no other tree of the batch shares.
        users = np.zeros(len(self.node_pos), dtype=np.int64)
        for nodes in self.nodes:
            users[np.unique(nodes[nodes >= 0])] += 1
        first_own = []
        for i, tree in enumerate(trees):
            node = self.nodes[i]
            alone = (node < 0) | (users[np.maximum(node, 0)] == 1)
            first_own.append(int(self.map_index(i, np.flatnonzero(alone)).min()) if alone.any() else n)
        return PackedBatch(
            execution_ids=[tree.execution_id for tree in trees],
            ids=cat["ids"].astype(np.int64),
            depth=cat["depth"].astype(np.int64),
            subtree_end=cat["subtree_end"].astype(np.int64),
            is_policy=spread("is_policy", False, bool),
            behavior_logprob=spread("behavior_logprob", 0.0, np.float32),
            weight_version=spread("weight_version", -1, np.int64),
            tree_ptr=np.asarray([*first_own, n], dtype=np.int64),
            edge_row=edges("edge_row"),
            edge_label=cat_edges("edge_label"),
            edge_target=edges("edge_target"),
            w_plus=cat_edges("w_plus"),
            w_minus=cat_edges("w_minus"),
            w_tok=cat_edges("w_tok"),
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
