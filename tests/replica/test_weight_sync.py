"""Weight syncs in buckets (gyre.replica.weight_sync) over real gloo groups (two cells' ranks on two threads):
the weights arrive exactly, in as many buckets as ``bucket_bytes`` cuts, and the extra memory on either
side stays within one bucket plus one tensor; a flat copy of the model would be the whole model."""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gyre.replica import weight_sync
from gyre.replica.sharding import Replica, ShardLayout, param_specs
from gyre.replica.transfer import GroupRegistry, Transfer, host_store

KIB = 1024


class LiveTensorBytes(TorchDispatchMode):
    """The most bytes of tensor storage allocated inside this mode and alive at once (on this thread).

    Every op's outputs are watched: an output whose storage no input shares is a new allocation; it stays
    counted while any tensor made inside the mode still refers to it (views included)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._refs: dict[int, int] = defaultdict(int)  # storage address -> tensors alive that use it
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor) or tensor.untyped_storage().nbytes() == 0:
                continue
            address = tensor.untyped_storage().data_ptr()
            if address not in self._sizes and address in inputs:
                continue  # a view or an in-place result of memory allocated elsewhere
            if address not in self._sizes:
                self._sizes[address] = tensor.untyped_storage().nbytes()
                self.live += self._sizes[address]
                self.peak = max(self.peak, self.live)
            self._refs[address] += 1
            weakref.finalize(tensor, self._release, address)
        return out

    def _release(self, address: int) -> None:
        self._refs[address] -= 1
        if self._refs[address] == 0:
            self.live -= self._sizes.pop(address)
            del self._refs[address]


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(8)])  # 8 x 64 KiB weights + biases


def run_both(sender, receiver):
    results, errors = [None, None], []

    def run(index, job):
        try:
            results[index] = job()
        except BaseException as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate((sender, receiver))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def port():
    store, port = host_store()
    yield port
    del store


@pytest.mark.parametrize("to", ["replica", "engine"])
def test_a_sync_moves_exact_weights_in_buckets_within_a_bucket_and_a_tensor(port, to):
    source, target = Replica(model()), Replica(model())
    with torch.no_grad():
        for param in target.params:
            param.zero_()
    layout = ShardLayout(param_specs(source.model), ranks=1)
    bucket_bytes = 160 * KIB  # two of the 64 KiB weights and their biases
    plan = layout.bucket_plan(bucket_bytes)
    largest = max(p.numel() * p.element_size() for p in source.params)
    total = sum(p.numel() * p.element_size() for p in source.params)
    assert len(plan) >= 4 and total > 3 * bucket_bytes
    move = Transfer(1, "sync", ("core", "cell1"), "127.0.0.1", port, timeout_s=60)
    registries = GroupRegistry(), GroupRegistry()
    received: dict[str, torch.Tensor] = {}

    def send():
        with LiveTensorBytes() as memory:
            weight_sync.send(registries[0].group(move, "core", 0), source, layout, 0, plan)
        return memory.peak

    def receive():
        group = registries[1].group(move, "cell1", 0)
        with LiveTensorBytes() as memory:
            if to == "replica":
                weight_sync.receive_into(group, target, layout, 0, plan, "cpu")
            else:  # what an engine reads: each whole parameter, taken (copied) as it comes
                for name, tensor in weight_sync.receive_whole(group, layout, 0, plan, "cpu",
                                                              weight_sync.gather_on_rank0(layout, 0)):
                    received[name] = tensor.clone()
        return memory.peak

    sent_peak, received_peak = run_both(send, receive)
    expected = dict(source.model.named_parameters())
    got = dict(target.model.named_parameters()) if to == "replica" else received
    for name, weight in expected.items():
        assert torch.equal(got[name], weight), name
    assert 0 < sent_peak <= bucket_bytes + largest
    kept = total if to == "engine" else 0  # the engine side here keeps its own copy of every tensor it took
    assert 0 < received_peak - kept <= bucket_bytes + largest
    assert sent_peak < total / 3  # a flat copy of the shard would have been the whole model


def test_the_memory_meter_sees_a_flat_copy(port):
    """The meter itself: the old way (one flat copy of the shard) peaks at the whole model."""
    replica = Replica(model())
    total = sum(p.numel() * p.element_size() for p in replica.params)
    with LiveTensorBytes() as memory:
        flat = replica.flat_shard()
        del flat
    assert memory.peak == total and memory.live == 0


def test_bf16_on_the_wire_from_float32_master_weights(port):
    """Master weights in float32 go out in the model's dtype (bfloat16): the wire carries half the bytes and
    the receiver gets the rounded weights."""
    source = Replica(model())
    layout = ShardLayout(param_specs(model().to(torch.bfloat16)), ranks=1)
    plan = layout.bucket_plan(160 * KIB)
    move = Transfer(1, "join", ("core", "cell1"), "127.0.0.1", port, timeout_s=60)
    registries = GroupRegistry(), GroupRegistry()

    def receive():
        group = registries[1].group(move, "cell1", 0)
        return dict(weight_sync.receive_whole(group, layout, 0, plan, "cpu", weight_sync.gather_on_rank0(layout, 0)))

    _, got = run_both(lambda: weight_sync.send(registries[0].group(move, "core", 0), source, layout, 0, plan), receive)
    for name, weight in source.model.named_parameters():
        assert got[name].dtype == torch.bfloat16 and torch.equal(got[name], weight.detach().to(torch.bfloat16)), name


def test_packing_a_stream_for_vllm_holds_one_bucket_beside_the_stream():
    """What a vLLM engine does with a stream of whole parameters: pack them into its own buckets for its
    workers, each tensor copied in as it comes and then dropped by the stream."""
    from gyre.replica.buckets import packed_buckets, unpack

    shapes = [(128, 128), (128,), (300, 128), (128, 128), (64,), (128, 128)]
    bucket_bytes, largest = 100 * KIB, 300 * 128 * 4

    def stream():
        for index, shape in enumerate(shapes):
            yield f"p{index}", torch.full(shape, float(index))

    sums: dict[str, float] = {}
    with LiveTensorBytes() as memory:
        buckets = 0
        for metas, flat in packed_buckets(stream(), bucket_bytes):
            assert flat.numel() <= max(bucket_bytes, largest)
            sums.update({name: float(tensor.sum()) for name, tensor in unpack(flat, metas)})
            buckets += 1
            del metas, flat  # sent: the consumer lets go of it before the next is packed
    assert sums == {f"p{i}": float(i * torch.Size(shape).numel()) for i, shape in enumerate(shapes)}
    assert buckets == 4  # [64K + bias], [150K alone], [64K + bias], [64K]
    # the bucket being filled (or one oversized tensor's own) and the stream's current tensor
    assert memory.peak <= max(bucket_bytes, largest) + largest + 64  # + the scalars of the sums above
