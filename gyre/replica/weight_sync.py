"""Weights between cells in buckets: the core's shards to a joining satellite's replica or to a rollout cell's
engine, never more than one bucket in flight.

Rank r of every cell taking part moves its shard over the transfer's group of rank r (``transfer``), cut
into the buckets of ``ShardLayout.bucket_plan`` (ranges of parameters of at most ``bucket_bytes`` in the
model's dtype; a larger parameter alone): the sender copies its part of one bucket, broadcasts it and
drops it before the next. A replica takes each bucket into its parameters in place; a rollout cell gathers
each bucket's parts onto rank 0, which hands the whole parameters to its engine as a stream (the engine
reads the next bucket only when it has taken the last). The extra memory of a sync is one bucket and one
parameter on each side (measured in tests/replica/test_weight_sync.py), never a flat copy of the model;
on a rollout cell of N ranks, rank 0 also holds the other ranks' parts of the bucket while it joins them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist

from gyre.replica.sharding import Replica, ShardLayout
from gyre.replica.transfer import broadcast

Gather = Callable[[torch.Tensor, range], list[torch.Tensor]]


def send(group: dist.ProcessGroup, replica: Replica, layout: ShardLayout, rank: int, plan: list[range]) -> None:
    """Root: broadcast this rank's part of every bucket, in the model's dtype. One buffer serves every bucket
    (gloo may hold a finished broadcast's tensor a while: a fresh one per bucket could briefly make two)."""
    buffer = layout.buffer(plan, rank, replica.params[0].device)
    for bucket in plan:
        broadcast(group, replica.bucket_shard_into(bucket, buffer[: layout.bucket_numel(bucket, rank)]), root=0)


def receive_into(group: dist.ProcessGroup, replica: Replica, layout: ShardLayout, rank: int, plan: list[range],
                 device: str) -> None:
    """Take every bucket into ``replica``'s parameters in place (its optimizer keeps pointing at them)."""
    buffer = layout.buffer(plan, rank, device)
    for bucket in plan:
        replica.load_bucket_shard(bucket, broadcast(group, buffer[: layout.bucket_numel(bucket, rank)], root=0))


def receive_whole(group: dist.ProcessGroup, layout: ShardLayout, rank: int, plan: list[range], device: str,
                  gather: Gather) -> Iterator[tuple[str, torch.Tensor]]:
    """The whole parameters, bucket by bucket, as they arrive: on rank 0 of the cell each bucket's parts are
    gathered (``gather``: the parts by rank on rank 0, nothing elsewhere) and joined one parameter at a time;
    the other ranks yield nothing but must still run the stream to its end (they take part in every
    gather). Each yielded tensor is the consumer's own (the receive buffer is reused for the next bucket)."""
    buffer = layout.buffer(plan, rank, device)
    for bucket in plan:
        parts = gather(broadcast(group, buffer[: layout.bucket_numel(bucket, rank)], root=0), bucket)
        if not parts:  # not rank 0: its part went to rank 0
            continue
        for name, tensor in layout.iter_assembled(parts, bucket):
            shares = tensor.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
            yield name, tensor.clone() if shares else tensor
        del parts


def gather_on_rank0(layout: ShardLayout, rank: int) -> Gather:
    """Every rank's part of a bucket on rank 0 of the cell (its default process group), index = rank."""
    def gather(flat: torch.Tensor, bucket: range) -> list[torch.Tensor]:
        if layout.ranks == 1:
            return [flat]
        longest = max(layout.bucket_numel(bucket, r) for r in range(layout.ranks))
        padded = torch.zeros(longest, dtype=flat.dtype, device=flat.device)
        padded[: flat.numel()] = flat
        parts = [torch.empty_like(padded) for _ in range(layout.ranks)] if rank == 0 else None
        dist.gather(padded, parts, dst=0)
        return parts or []

    return gather
