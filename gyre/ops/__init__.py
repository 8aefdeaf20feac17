"""Tree attention backends (dense reference, block-sparse CPU default, flex on CUDA), log-prob gather, and
chunked training of trees longer than a micro-batch."""

from gyre.ops.chunked import chunked_tree_backward, chunked_tree_logprobs
from gyre.ops.forward import gather_logprobs, tree_logprobs, use_tree_attention
from gyre.ops.tree_attention import TreeAttentionPlan, dense_tree_mask, make_plan, register_tree_attention

__all__ = [
    "TreeAttentionPlan",
    "chunked_tree_backward",
    "chunked_tree_logprobs",
    "dense_tree_mask",
    "gather_logprobs",
    "make_plan",
    "register_tree_attention",
    "tree_logprobs",
    "use_tree_attention",
]
