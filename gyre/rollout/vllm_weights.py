"""The engine's side of weight loads into vLLM's workers (the workers' side: ``vllm_worker``).

vLLM runs its model in worker processes of its own, so ``load_weights`` cannot hand them tensors: its RPC
carries plain values only. As verl and slime do, the engine process and the workers form one process
group (the engine is rank 0 and hosts the rendezvous store; worker i is rank 1 + i), made on the first
load and kept for the engine's life. A load streams the named tensors in buckets of at most
``bucket_bytes`` (``gyre.replica.buckets``): for each bucket one RPC tells every worker its layout and
the bytes follow by ``broadcast``; the worker loads them into the model and the next bucket is built.
The load is framed by ``gyre_begin_weight_load`` / ``gyre_finish_weight_load`` (vLLM's layerwise reload).
Memory beyond the model on either side: one bucket.

Gloo carries CPU tensors between any processes (the CPU build; a GPU engine too, staged through host
memory); NCCL (``backend="nccl"``) needs the engine's process and the workers on different GPUs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from gyre.replica.buckets import TensorMeta, packed_buckets
from gyre.replica.transfer import broadcast, host_store, make_group, shutdown_group


class WorkerWeightGroup:
    def __init__(self, llm: Any, workers: int, *, backend: str = "gloo", host: str = "127.0.0.1",
                 bucket_bytes: int, timeout_s: float = 300.0):
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"weight group backend must be 'gloo' or 'nccl', got {backend!r}")
        self.llm, self.workers, self.backend, self.host = llm, workers, backend, host
        self.bucket_bytes, self.timeout_s = bucket_bytes, timeout_s
        self._store: Any = None
        self._group: Any = None
        self.buckets_sent = 0
        self.largest_bucket_bytes = 0  # the most one bucket held (the bound on a load's extra memory)

    async def _open(self) -> None:
        self._store, port = host_store(self.host)
        name = f"gyre/vllm-weights/{uuid.uuid4().hex[:12]}"
        world = 1 + self.workers
        joined = asyncio.ensure_future(self.llm.collective_rpc(
            "gyre_join_weight_group", args=(name, self.host, port, world, self.backend)))
        mine = asyncio.ensure_future(asyncio.to_thread(
            make_group, name, 0, world, self.host, port, self.backend, self.timeout_s))
        await _both(joined, mine)
        self._group = mine.result()

    async def send(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Stream ``weights`` to every worker, bucket by bucket; returns how many tensors went. ``weights``
        may be lazy (e.g. received from another cell as this runs): it is read, and each tensor copied into
        the bucket being filled, off the event loop; no reference to a tensor is kept after its copy."""
        if self._group is None:
            await self._open()
        device = "cuda" if self.backend == "nccl" else "cpu"
        buckets: Iterator[tuple[list[TensorMeta], torch.Tensor]] = packed_buckets(weights, self.bucket_bytes, device)
        sent = 0
        await self.llm.collective_rpc("gyre_begin_weight_load")
        try:
            while (bucket := await asyncio.to_thread(next, buckets, None)) is not None:
                metas, flat = bucket
                self.largest_bucket_bytes = max(self.largest_bucket_bytes, flat.numel())
                received = asyncio.ensure_future(self.llm.collective_rpc(
                    "gyre_receive_bucket", args=([m.as_list() for m in metas], flat.numel())))
                sending = asyncio.ensure_future(asyncio.to_thread(broadcast, self._group, flat, 0))
                await _both(received, sending)
                del flat, bucket
                sent += len(metas)
                self.buckets_sent += 1
        finally:  # also after a failed load: vLLM puts back the layers it got nothing for
            await self.llm.collective_rpc("gyre_finish_weight_load")
        return sent

    async def close(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            try:
                await self.llm.collective_rpc("gyre_leave_weight_group")
            finally:
                shutdown_group(group)
        self._store = None


async def _both(first: asyncio.Future, second: asyncio.Future) -> None:
    """Wait for both; if either fails, raise its error at once (the other, a blocked collective, is left
    to its timeout)."""
    done, pending = await asyncio.wait({first, second}, return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        task.result()
    if pending:
        await asyncio.gather(*pending)
