"""A training replica sharded over two ranks with FSDP2 (gloo, two real processes; a unit per decoder layer)
trains exactly as one unsharded replica: the same loss, gradients and updated weights, whatever each rank's
share of the micro-batches (one rank gets the long tree trained in chunks, a round where a rank has nothing
to train), with the whole model gathered per round or layer by layer (``reshard_after_forward``)."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "trainer"))
from test_cluster import LR, step_batches  # noqa: E402

from gyre.algo.losses import LossConfig  # noqa: E402
from gyre.replica.sharding import Replica, _units, decoder_layers, full, local  # noqa: E402
from gyre.replica.step import StepConfig  # noqa: E402

STEP = StepConfig(attention_backend="block")


def drift_from_the_reference(replica: Replica) -> None:
    """Scale the policy's weights (each rank its shard) so that the KL to the reference has a gradient."""
    with torch.no_grad():
        for param in replica.params:
            local(param).mul_(1.05)


def one_rank_of_two(rank: int, port: int, batches, kl_coef: float, reshard: bool, results) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    replica = Replica.build("tiny", dtype="float32", device="cpu", mesh=init_device_mesh("cpu", (2,)),
                            reference_path="tiny" if kl_coef else None, reshard_after_forward=reshard)
    units = _units(replica.model)
    assert len(units) == len(decoder_layers(replica.model)) + 1  # one per layer, and the root
    drift_from_the_reference(replica)
    replica.make_optimizer(LR, 0.0, (0.9, 0.999))
    mine = batches[rank::2]
    rounds = (len(batches) + 1) // 2 + 1  # one more round than needed: both ranks train nothing in it
    stats = []
    for index in range(rounds):
        stats += replica.train(mine[index:index + 1], LossConfig(kl_coef=kl_coef), STEP)
    grads = {name: full(p.grad).detach().clone() for name, p in zip(
        [n for n, _ in replica.model.named_parameters()], replica.params)}
    loss = torch.tensor(sum(s["loss"] for s in stats), dtype=torch.float64)
    dist.all_reduce(loss)
    norm = replica.step(max_grad_norm=1.0)
    weights = dict(replica.full_params())
    if rank == 0:
        results.put({"loss": float(loss), "norm": norm, "rounds": dict(replica.rounds), "grads": {k: v.numpy() for k, v in grads.items()},
                     "weights": {k: v.numpy() for k, v in weights.items()}})
    dist.barrier()
    dist.destroy_process_group()


def unsharded(batches, kl_coef: float) -> dict:
    replica = Replica.build("tiny", dtype="float32", device="cpu", mesh=None, reference_path="tiny" if kl_coef else None)
    drift_from_the_reference(replica)
    replica.make_optimizer(LR, 0.0, (0.9, 0.999))
    stats = replica.train(batches, LossConfig(kl_coef=kl_coef), STEP)
    assert (sum(s.get("kl", 0.0) for s in stats) > 1e-4) == bool(kl_coef)
    names = [n for n, _ in replica.model.named_parameters()]
    grads = {name: p.grad.detach().clone() for name, p in zip(names, replica.params)}
    norm = replica.step(max_grad_norm=1.0)
    return {"loss": sum(s["loss"] for s in stats), "norm": norm, "grads": grads, "weights": dict(replica.full_params())}


@pytest.mark.slow
@pytest.mark.parametrize(("kl_coef", "reshard"), [(0.0, False), (0.1, False), (0.1, True)],
                         ids=["policy-loss", "with-kl-to-a-sharded-reference", "layer-by-layer-with-kl"])
def test_a_two_rank_sharded_step_equals_the_unsharded_step(tiny_model_path, kl_coef, reshard):
    from gyre.ports import free_ports

    # a ~4K-token tree in 2K chunks: the chunked path on one rank, at a sixth of test_cluster's long tree's cost
    batches = step_batches(big_turns=8, big_subagents=1, chunk_tokens=2048)
    assert batches[0].chunk_tokens is not None and batches[0].num_tokens > 2 * 2048  # rank 0's first, in chunks
    expected = unsharded(batches, kl_coef)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_ports(1)[0]
    ranks = [context.Process(target=one_rank_of_two, args=(r, port, batches, kl_coef, reshard, results)) for r in range(2)]
    for process in ranks:
        process.start()
    got = results.get(timeout=300)
    for process in ranks:
        process.join(60)
        assert process.exitcode == 0
    if reshard:  # the round with the chunked tree is gathered; the others (the last: fillers only) are not
        assert got["rounds"]["gathered"] == 1 and got["rounds"]["layer_by_layer"] >= 2, got["rounds"]
    else:
        assert got["rounds"] == {"gathered": (len(batches) + 1) // 2 + 1, "layer_by_layer": 0}
    assert got["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert got["norm"] == pytest.approx(expected["norm"], rel=1e-5)
    for name, grad in expected["grads"].items():
        torch.testing.assert_close(torch.from_numpy(got["grads"][name]), grad, atol=1e-6, rtol=1e-5, msg=name)
    for name, weight in expected["weights"].items():
        torch.testing.assert_close(torch.from_numpy(got["weights"][name]), weight, atol=1e-5, rtol=1e-5, msg=name)
