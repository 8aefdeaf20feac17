"""Data types shared by every room of Gyre.

This module is imported by processes that must stay light (the proxy, harness runners), so it depends on
the standard library and numpy only; torch is imported lazily where a type converts itself to tensors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

AgentRole = Literal["main", "main-summary", "sub", "sub-summary"]
AGENT_ROLES: tuple[str, ...] = ("main", "main-summary", "sub", "sub-summary")
# Priority used by bounded path sampling: lower value is kept first.
AGENT_PRIORITY: dict[str, int] = {role: rank for rank, role in enumerate(AGENT_ROLES)}

ExecutionStatus = Literal["finished", "timeout", "crashed"]


@dataclass
class CallRecord:
    """One model call exactly as the policy saw and produced it."""

    execution_id: str
    call_id: str
    agent: str
    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    weight_version: int
    cell_id: str = ""
    finish_reason: str = "stop"
    timings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.agent not in AGENT_PRIORITY:
            raise ValueError(
                f"CallRecord {self.call_id!r}: agent must be one of {AGENT_ROLES}, got {self.agent!r}"
            )
        if len(self.response_ids) != len(self.response_logprobs):
            raise ValueError(
                f"CallRecord {self.call_id!r}: {len(self.response_ids)} response ids but "
                f"{len(self.response_logprobs)} log-probs"
            )
        if not self.prompt_ids:
            raise ValueError(f"CallRecord {self.call_id!r}: empty prompt")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        return cls(**data)


@dataclass
class Execution:
    """One agent run on one task: its calls, how it ended and what it scored."""

    id: str
    task_id: str
    group: str
    calls: list[CallRecord] = field(default_factory=list)
    status: ExecutionStatus = "finished"
    reward: float = 0.0
    reward_detail: dict[str, Any] = field(default_factory=dict)
    workspace: str = ""
    domain: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.reward <= 1.0:
            raise ValueError(f"Execution {self.id!r}: reward {self.reward} is outside [0, 1]")


@dataclass
class TrajectoryTree:
    """An execution's calls merged into a prefix-shared token tree, as flat arrays in DFS preorder.

    Token ``k`` sits at position ``depth[k]`` of every path through it; its subtree is the index range
    ``[k, subtree_end[k])``. Key ``k`` is visible to query ``q`` iff ``k <= q < subtree_end[k]``.
    ``leaves`` holds the preorder index of the last token of each root-to-leaf path, ``leaf_agent`` the
    role of the call that ends there; ``token_agent`` the role of the call that generated each policy token
    (a path may carry the main agent's turns and end in a summary or a sub-agent's fork). After loss weights are assigned, the edge arrays hold one entry per
    trained prediction: row ``edge_row`` (the parent token) predicts ``edge_label`` (the token at
    ``edge_target``), weighted by ``w_plus`` (sum of positive advantage weights of the kept paths through
    it), ``w_minus`` (sum of negative ones) and ``w_tok`` (sum of unsigned path weights, for entropy/KL).
    """

    execution_id: str
    ids: np.ndarray  # int64 [N]
    depth: np.ndarray  # int64 [N]
    subtree_end: np.ndarray  # int64 [N]
    parent: np.ndarray  # int64 [N], -1 for a root token
    is_policy: np.ndarray  # bool [N]
    behavior_logprob: np.ndarray  # float32 [N], 0 where not policy
    weight_version: np.ndarray  # int64 [N], -1 where not policy
    token_agent: np.ndarray  # int8 [N], AGENT_PRIORITY of the call that generated a policy token; -1 for context
    leaves: np.ndarray  # int64 [P]
    leaf_agent: list[str]
    edge_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    edge_label: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    edge_target: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    w_plus: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    w_minus: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    w_tok: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))

    @property
    def num_tokens(self) -> int:
        return int(self.ids.shape[0])

    @property
    def num_paths(self) -> int:
        return int(self.leaves.shape[0])

    def path_indices(self, path: int) -> np.ndarray:
        """Preorder indices of the tokens on root-to-leaf path ``path`` (its ancestors, in order)."""
        leaf = int(self.leaves[path])
        index = np.arange(leaf + 1)
        return index[self.subtree_end[: leaf + 1] > leaf]

    def paths_through(self) -> np.ndarray:
        """For every token, how many root-to-leaf paths cross it (leaves inside its subtree range)."""
        leaves = np.sort(self.leaves)
        index = np.arange(self.num_tokens)
        return np.searchsorted(leaves, self.subtree_end) - np.searchsorted(leaves, index)

    def path_token_count(self) -> int:
        """Tokens over all paths if each were run as its own sequence."""
        return int(self.paths_through().sum())


@dataclass
class PackedBatch:
    """Several trees in one sequence (batch size 1), with their edge lists.

    Index arrays are already offset into the packed sequence. The trees' common prompts are laid out once
    (``gyre.trajectory.sharing``); ``tree_ptr`` holds where each tree's own tokens start, its first token
    no other tree shares (length trees + 1; without shared prompts, the start of each tree). ``to_torch`` gives the tensors the trainer feeds to the model. ``chunk_tokens`` is
    set on a batch longer than a micro-batch (one tree): it is trained in chunks of at most that many
    tokens, with the same loss and gradients (``gyre.ops.chunked``).
    """

    execution_ids: list[str]
    ids: np.ndarray
    depth: np.ndarray
    subtree_end: np.ndarray
    is_policy: np.ndarray
    behavior_logprob: np.ndarray
    weight_version: np.ndarray
    tree_ptr: np.ndarray
    edge_row: np.ndarray
    edge_label: np.ndarray
    edge_target: np.ndarray
    w_plus: np.ndarray
    w_minus: np.ndarray
    w_tok: np.ndarray
    path_tokens: int = 0  # tokens over all kept paths of these trees (for tree_token_ratio)
    chunk_tokens: int | None = None  # train in chunks of at most this many tokens (None: in one pass)

    @property
    def num_tokens(self) -> int:
        return int(self.ids.shape[0])

    def to_torch(self, device: Any = "cpu") -> dict[str, Any]:
        import torch

        def tensor(array: np.ndarray, dtype: Any) -> Any:
            return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype, device=device)

        return {
            "ids": tensor(self.ids, torch.long),
            "depth": tensor(self.depth, torch.long),
            "subtree_end": tensor(self.subtree_end, torch.long),
            "is_policy": tensor(self.is_policy, torch.bool),
            "behavior_logprob": tensor(self.behavior_logprob[self.edge_target], torch.float32),
            "edge_row": tensor(self.edge_row, torch.long),
            "edge_label": tensor(self.edge_label, torch.long),
            "w_plus": tensor(self.w_plus, torch.float64),
            "w_minus": tensor(self.w_minus, torch.float64),
            "w_tok": tensor(self.w_tok, torch.float64),
        }
