"""Tree attention backends (dense reference, block-sparse CPU default, flex on CUDA) and log-prob gather."""

from gyre.ops.forward import gather_logprobs, tree_logprobs, use_tree_attention
from gyre.ops.tree_attention import TreeAttentionPlan, dense_tree_mask, make_plan, register_tree_attention

__all__ = [
    "TreeAttentionPlan",
    "dense_tree_mask",
    "gather_logprobs",
    "make_plan",
    "register_tree_attention",
    "tree_logprobs",
    "use_tree_attention",
]
