"""Tree-packed training equals per-path training: same loss, same gradient for every parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gyre.algo.advantages import compute_advantages
from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.protocol import Execution
from gyre.trainer.per_path import expand_paths, path_backward
from gyre.replica.step import StepConfig, microbatch_backward, proximal_logprobs
from gyre.trajectory import assign_loss_weights, build_tree, pack_trees, prune_tree, select_paths
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

SPEC = WorkloadSpec(
    turns=4, system_tokens=12, task_tokens=10, response_tokens=(2, 7), tool_tokens=(1, 6),
    retry_prob=0.5, subagents=2, subagent_turns=2, summary_every=2, vocab_size=2000,
)


@pytest.fixture(scope="module")
def model64(tiny_model_path):
    model = load_model(tiny_model_path, dtype="float64")
    model.train()
    return model


def random_executions(seed: int, count: int = 4) -> list[Execution]:
    executions = [synthetic_execution(f"e{seed}-{i}", SPEC, seed * 100 + i, group=f"g{i % 2}") for i in range(count)]
    rng = np.random.default_rng(seed)
    # Mixed random "policy" tokens inside prompts: a prompt token that another call generated at the same
    # position is a policy token; also rewards of both signs after group centring.
    for execution in executions:
        execution.reward = float(rng.random())
    return executions


def set_behaviour_near_model(model, trees, rng, spread: float) -> None:
    """Behaviour log-probs = the model's own log-probs plus noise, so ratios straddle the clip range."""
    for tree in trees:
        assign_loss_weights(tree, 1.0, num_executions=1)
        with torch.no_grad():
            logp = proximal_logprobs(model, pack_trees([tree], 10**9), LossConfig(), StepConfig(attention_backend="dense"))[0]
        n = tree.edge_target.shape[0]
        tree.behavior_logprob = tree.behavior_logprob.copy()
        tree.behavior_logprob[tree.edge_target] = (logp.numpy() + rng.normal(0, spread, n)).astype(np.float32)


def grads(model) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("aggregation", ["execution_token_mean", "path_token_mean"])
@pytest.mark.parametrize("backend", ["block", "dense"])
def test_tree_loss_and_gradients_equal_per_path(model64, seed, aggregation, backend):
    rng = np.random.default_rng(seed)
    executions = random_executions(seed)
    advantages = compute_advantages([e.reward for e in executions], [e.group for e in executions])
    assert (advantages > 0).any() and (advantages < 0).any()
    trees = []
    for execution in executions:
        tree = build_tree(execution.calls)
        trees.append(prune_tree(tree, select_paths(tree, 3 if seed == 2 else None, rng)))
    assert any(tree.num_paths > 1 for tree in trees)
    set_behaviour_near_model(model64, trees, rng, spread=0.4)
    for tree, advantage in zip(trees, advantages):
        assign_loss_weights(tree, advantage, num_executions=len(trees), aggregation=aggregation)
    cfg = LossConfig(clip_low=0.2, clip_high=0.25, dual_clip=3.0, entropy_coef=0.01, temperature=0.9)

    # Tree-packed: several trees per micro-batch, small attention blocks so blocks cross node boundaries.
    model64.zero_grad(set_to_none=True)
    batches = pack_trees(trees, max_tokens=max(t.num_tokens for t in trees) + 40)
    assert len(batches) > 1
    step_cfg = StepConfig(attention_backend=backend, attention_block_size=16)
    stats = [microbatch_backward(model64, batch, cfg, step_cfg) for batch in batches]
    tree_loss = sum(s["loss"] for s in stats)
    tree_grads = grads(model64)
    assert sum(s["clipped_edges"] for s in stats) > 0, "clipping must be active for this test to mean anything"

    model64.zero_grad(set_to_none=True)
    samples = expand_paths(trees, advantages, num_executions=len(trees), aggregation=aggregation)
    path_loss = sum(float(path_backward(model64, sample, cfg)) for sample in samples)
    path_grads = grads(model64)

    assert tree_loss == pytest.approx(path_loss, abs=1e-5)
    assert tree_grads.keys() == path_grads.keys()
    for name, grad in tree_grads.items():
        assert torch.allclose(grad, path_grads[name], atol=1e-5, rtol=0), name


def test_summing_signed_advantages_before_clipping_is_not_exact(model64):
    """The A+/A- split matters: with paths of opposite sign through one edge, merging them first differs."""
    rng = np.random.default_rng(5)
    execution = random_executions(5, count=1)[0]
    tree = build_tree(execution.calls)
    set_behaviour_near_model(model64, [tree], rng, spread=0.6)
    per_path_adv = np.where(np.arange(tree.num_paths) % 2 == 0, 1.0, -1.0)
    assign_loss_weights(tree, per_path_adv, num_executions=1)
    cfg = LossConfig(clip_low=0.1, clip_high=0.1)
    batch = pack_trees([tree], 10**9)[0]
    model64.zero_grad(set_to_none=True)
    split_loss = microbatch_backward(model64, batch, cfg, StepConfig(attention_backend="dense"))["loss"]
    net = batch.w_plus + batch.w_minus
    batch.w_plus, batch.w_minus = np.clip(net, 0, None), np.clip(net, None, 0)
    model64.zero_grad(set_to_none=True)
    merged_loss = microbatch_backward(model64, batch, cfg, StepConfig(attention_backend="dense"))["loss"]
    assert abs(split_loss - merged_loss) > 1e-4


def test_decoupled_ppo_with_truncated_importance_weights_is_exact(model64):
    """proximal=recompute: ratio against the trainer's own log-probs, truncated IS weight against behaviour."""
    rng = np.random.default_rng(7)
    executions = random_executions(7)
    advantages = compute_advantages([e.reward for e in executions], [e.group for e in executions])
    trees = [build_tree(e.calls) for e in executions]
    set_behaviour_near_model(model64, trees, rng, spread=1.0)
    for tree, advantage in zip(trees, advantages):
        assign_loss_weights(tree, advantage, num_executions=len(trees))
    cfg = LossConfig(proximal="recompute", tis_cap=1.5)
    step_cfg = StepConfig(attention_backend="block", attention_block_size=32)
    batches = pack_trees(trees, max_tokens=10**9)
    model64.zero_grad(set_to_none=True)
    proximal = proximal_logprobs(model64, batches, cfg, step_cfg)
    tree_loss = sum(
        microbatch_backward(model64, b, cfg, step_cfg, proximal_logp=p)["loss"] for b, p in zip(batches, proximal)
    )
    tree_grads = grads(model64)
    model64.zero_grad(set_to_none=True)
    samples = expand_paths(trees, advantages, num_executions=len(trees), aggregation="execution_token_mean")
    path_loss = sum(float(path_backward(model64, s, cfg)) for s in samples)
    assert tree_loss == pytest.approx(path_loss, abs=1e-5)
    for name, grad in tree_grads.items():
        assert torch.allclose(grad, grads(model64)[name], atol=1e-5, rtol=0), name
