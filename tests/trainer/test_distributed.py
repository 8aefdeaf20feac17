"""Weight transfer over a real gloo group (two ranks on two threads of this process)."""

from __future__ import annotations

import threading

import torch

from gyre.trainer.distributed import GroupSpec, broadcast_params, host_store, make_group


def test_broadcast_params_fills_the_receiver_in_place_and_never_writes_the_root():
    """The core keeps training while a joining satellite pulls its weights: the root's parameter storage
    must stay exactly where it is (swapping it under a running forward crashed a cell), and the receiver's
    parameters are overwritten in place (its optimizer keeps pointing at them)."""
    torch.manual_seed(0)
    root, receiver = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    root_storage = [p.data_ptr() for p in root.parameters()]
    receiver_storage = [p.data_ptr() for p in receiver.parameters()]
    store, port = host_store()
    errors: list[BaseException] = []

    def join(rank: int, model: torch.nn.Module) -> None:
        try:
            broadcast_params(make_group(GroupSpec(1, rank, 2, "127.0.0.1", port, timeout_s=30)), model, root=0)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=join, args=(rank, model)) for rank, model in ((0, root), (1, receiver))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert [p.data_ptr() for p in root.parameters()] == root_storage
    assert [p.data_ptr() for p in receiver.parameters()] == receiver_storage
    for mine, theirs in zip(receiver.parameters(), root.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    del store
