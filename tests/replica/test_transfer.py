"""Weights and gradients between cells over real gloo groups (two cells' ranks on two threads here)."""

from __future__ import annotations

import threading

import pytest
import torch

from gyre.replica.sharding import Replica
from gyre.replica.transfer import GroupRegistry, Transfer, broadcast, host_store, reduce_sum


def run_ranks(*jobs) -> list:
    """Run each job on its own thread (one per cell taking part); returns their results, raising any error."""
    results, errors = [None] * len(jobs), []

    def run(index, job):
        try:
            results[index] = job()
        except BaseException as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results


@pytest.fixture
def store():
    store, port = host_store()
    yield port
    del store


def transfer(port: int, epoch: int, purpose: str = "sync") -> Transfer:
    return Transfer(epoch, purpose, ("core", "sat"), "127.0.0.1", port, timeout_s=30)


def test_a_weight_pull_fills_the_receiver_in_place_and_never_writes_the_root(store):
    """The core keeps training while a joining satellite pulls its weights: the root's parameter storage must
    stay exactly where it is, and the receiver's parameters are overwritten in place (its optimizer keeps
    pointing at them)."""
    torch.manual_seed(0)
    root, receiver = Replica(torch.nn.Linear(8, 4)), Replica(torch.nn.Linear(8, 4))
    root_storage = [p.data_ptr() for p in root.params]
    receiver_storage = [p.data_ptr() for p in receiver.params]
    registries = GroupRegistry(), GroupRegistry()
    move = transfer(store, 1, "join")

    def send():
        broadcast(registries[0].group(move, "core", 0), root.flat_shard(), root=0)

    def receive():
        flat = torch.empty_like(root.flat_shard())
        receiver.load_flat_shard(broadcast(registries[1].group(move, "sat", 0), flat, root=0))

    run_ranks(send, receive)
    assert [p.data_ptr() for p in root.params] == root_storage
    assert [p.data_ptr() for p in receiver.params] == receiver_storage
    for mine, theirs in zip(receiver.params, root.params, strict=True):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_shards_and_gradient_sums_move_in_the_models_dtype(store, dtype):
    """No float32 staging buffer: a bfloat16 replica's weights arrive bit-exact, in bfloat16, and a
    gradient reduce sums in it."""
    torch.manual_seed(1)
    weights = torch.randn(1000).to(dtype)
    grads = torch.randn(1000).to(dtype), torch.randn(1000).to(dtype)
    registries = GroupRegistry(), GroupRegistry()

    def core():
        broadcast(registries[0].group(transfer(store, 1), "core", 0), weights.clone(), root=0)
        return reduce_sum(registries[0].group(transfer(store, 1, "reduce"), "core", 0), grads[0].clone(), root=0)

    def satellite():
        received = broadcast(registries[1].group(transfer(store, 1), "sat", 0), torch.empty(1000, dtype=dtype), root=0)
        reduce_sum(registries[1].group(transfer(store, 1, "reduce"), "sat", 0), grads[1].clone(), root=0)
        return received

    total, received = run_ranks(core, satellite)
    assert received.dtype == dtype and torch.equal(received, weights)
    assert total.dtype == dtype and torch.equal(total, grads[0] + grads[1])


@pytest.mark.slow
def test_groups_end_with_their_epoch_so_live_groups_stay_bounded(store):
    """100 membership epochs, two transfers each: every rank keeps only the current epoch's groups, and a
    transfer repeated within an epoch (a weight sync every step) reuses its group."""
    registries = GroupRegistry(), GroupRegistry()
    flat = torch.ones(16)
    for epoch in range(1, 101):
        for purpose in ("sync", "sync", "reduce"):
            move = transfer(store, epoch, purpose)
            run_ranks(lambda: broadcast(registries[0].group(move, "core", 0), flat.clone(), 0),
                      lambda: broadcast(registries[1].group(move, "sat", 0), torch.empty(16), 0))
        assert registries[0].live == registries[1].live == 2
    assert registries[0].made == 200 and registries[0].ended == 198
    registries[0].close()
    assert registries[0].live == 0 and registries[0].ended == 200


def test_a_group_whose_shutdown_fails_is_not_counted_as_ended(store, monkeypatch):
    """The leak checks read ``ended``: a shutdown that raised (its connections may live on) must not count."""
    registries = GroupRegistry(), GroupRegistry()
    flat = torch.ones(4)
    move = transfer(store, 1)
    run_ranks(lambda: broadcast(registries[0].group(move, "core", 0), flat.clone(), 0),
              lambda: broadcast(registries[1].group(move, "sat", 0), torch.empty(4), 0))

    def broken(self):
        raise RuntimeError("planted: the backend could not shut the group down")

    monkeypatch.setattr(type(registries[0].group(move, "core", 0)), "shutdown", broken)
    registries[0].close()
    assert registries[0].live == 0 and registries[0].ended == 0 and registries[0].failed_shutdowns == 1
    monkeypatch.undo()
    registries[1].close()
    assert registries[1].ended == 1 and registries[1].failed_shutdowns == 0
