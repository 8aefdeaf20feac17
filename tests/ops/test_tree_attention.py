"""Tree attention backends agree with each other and with per-path causal forwards."""

from __future__ import annotations

import pytest
import torch

from gyre.models import load_model
from gyre.ops import dense_tree_mask, make_plan, tree_logprobs
from gyre.trajectory import assign_loss_weights, build_tree, pack_trees
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return load_model(tiny_model_path)


def packed(seed: int, count: int = 3, **spec):
    spec = WorkloadSpec(**{"turns": 4, "system_tokens": 16, "task_tokens": 16, "response_tokens": (4, 12),
                           "tool_tokens": (4, 20), "retry_prob": 0.5, **spec})
    trees = [build_tree(synthetic_execution(f"e{i}", spec, seed + i).calls) for i in range(count)]
    for tree in trees:
        assign_loss_weights(tree, 1.0, num_executions=count)
    return pack_trees(trees, 10**9)[0]


def test_dense_mask_rule_on_a_small_tree():
    # root(0) -> 1 -> {2 -> 3, 4}: preorder 0 1 2 3 4
    subtree_end = torch.tensor([5, 5, 4, 4, 5])
    expected = torch.tensor([
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 0, 0, 1],
    ], dtype=torch.bool)
    assert torch.equal(dense_tree_mask(subtree_end), expected)


@pytest.mark.parametrize("block_size", [7, 64])
def test_block_backend_equals_dense_reference_values_and_gradients(model, block_size):
    batch = packed(seed=0).to_torch()
    results = {}
    for backend in ("dense", "block"):
        model.zero_grad(set_to_none=True)
        logp, entropy = tree_logprobs(model, batch, backend=backend, block_size=block_size, with_entropy=True)
        (logp.sum() + entropy.sum()).backward()
        results[backend] = (logp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert torch.allclose(results["dense"][0], results["block"][0], atol=1e-5)
    for name, grad in results["dense"][1].items():
        assert torch.allclose(grad, results["block"][1][name], atol=1e-4, rtol=1e-4), name


def test_tree_logprobs_equal_per_path_causal_forward(model):
    execution = synthetic_execution("e", WorkloadSpec(turns=3, retry_prob=1.0, system_tokens=8, task_tokens=8), 3)
    tree = build_tree(execution.calls)
    assign_loss_weights(tree, 1.0, num_executions=1)
    batch = pack_trees([tree], 10**9)[0].to_torch()
    with torch.no_grad():
        logp, _ = tree_logprobs(model, batch, backend="block", block_size=16)
        by_target = dict(zip(tree.edge_target.tolist(), logp.tolist()))
        for p in range(tree.num_paths):
            rows = tree.path_indices(p)
            logits = model(input_ids=torch.as_tensor(tree.ids[rows])[None]).logits[0]
            reference = torch.log_softmax(logits, -1)
            for position in range(1, rows.shape[0]):
                if rows[position] in by_target:
                    expected = float(reference[position - 1, tree.ids[rows[position]]])
                    assert by_target[rows[position]] == pytest.approx(expected, abs=1e-5)


def test_block_backend_cost_follows_the_tree_not_the_packed_length():
    batch = packed(seed=1, count=6, subagents=3)
    subtree_end = torch.as_tensor(batch.subtree_end)
    n = subtree_end.shape[0]
    plan = make_plan(subtree_end, "block", block_size=32)
    tree_area = int(dense_tree_mask(subtree_end).sum())  # pairs the tree rule allows
    causal_area = n * (n + 1) // 2
    assert plan.attended_pairs < 0.4 * causal_area
    assert plan.attended_pairs == tree_area  # exactly the pairs the tree rule allows, nothing more
    assert plan.dense_mask is None
    assert all(b.end - b.start <= 32 for b in plan.blocks)
    assert any(isinstance(b.prefix, tuple) for b in plan.blocks)  # chains are zero-copy slices
    # A branch after a large sibling subtree gathers its ancestors and skips the sibling entirely.
    chain = lambda start, length, end: [end] * length  # noqa: E731  (a chain whose subtree ends at `end`)
    subtree_end = torch.tensor(chain(0, 10, 530) + list(range(11, 511)) + chain(510, 20, 530))
    subtree_end[10:510] = 510  # sibling A: a 500-token chain under the root chain
    plan = make_plan(subtree_end, "block", block_size=20)
    last = plan.blocks[-1]
    assert not isinstance(last.prefix, tuple) and last.prefix_len == 10  # the root chain only, gathered
    assert last.start == 510 and last.end == 530


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="attention_backend must be one of"):
        make_plan(torch.tensor([1]), "magic")


def flex_over_many_lengths(model, device: str, batches: int = 10) -> tuple[int, int]:
    """flex against the dense mask on batches of as many padded lengths; (padded lengths, graphs compiled)."""
    from torch._dynamo.utils import counters

    graphs_before = counters["stats"]["unique_graphs"]
    lengths = set()
    for i in range(batches):
        batch = packed(seed=20 + i, count=2 + 2 * i).to_torch(device)
        with torch.no_grad():
            dense, _ = tree_logprobs(model, batch, backend="dense")
            flex, _ = tree_logprobs(model, batch, backend="flex")
        assert torch.allclose(dense, flex, atol=1e-4)
        lengths.add(-(-batch["ids"].shape[-1] // 128))
    return len(lengths), counters["stats"]["unique_graphs"] - graphs_before


def test_flex_pads_to_its_block_size_and_equals_dense(model):
    """Forward only: flex has no backward on CPU (the GPU tests train through it). Three lengths: on CPU each
    compiles a kernel of its own (~25 s each beside the rest of the suite)."""
    lengths, _ = flex_over_many_lengths(model, "cpu", batches=3)
    assert lengths == 3


@pytest.mark.gpu
def test_flex_on_cuda_compiles_for_a_few_lengths_and_never_falls_back_uncompiled(tiny_model_path):
    """Every micro-batch has its own length. flex_attention compiled per length ran past dynamo's recompile
    limit (8) and fell back, without an error, to the uncompiled kernel that materialises the whole score
    matrix (a 60K-token tree asked the GPU for 55 GiB): now a few compiles serve every length."""
    lengths, graphs = flex_over_many_lengths(load_model(tiny_model_path, device="cuda"), "cuda")
    assert lengths > 8 and graphs <= 3


def test_block_backend_on_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="block runs on CPU only"):
        make_plan(torch.tensor([1], device="meta"), "block")


@pytest.mark.gpu
def test_flex_backend_equals_dense_on_cuda(tiny_model_path):
    model = load_model(tiny_model_path, device="cuda", dtype="float32")
    batch = packed(seed=2).to_torch("cuda")
    dense, _ = tree_logprobs(model, batch, backend="dense")
    flex, _ = tree_logprobs(model, batch, backend="flex")
    assert torch.allclose(dense, flex, atol=1e-3)
