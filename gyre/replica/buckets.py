"""Named tensors moved in buckets of bounded size: the unit in which weights travel between processes.

A weight transfer never materialises a second copy of the whole model: the tensors are grouped, in order,
into buckets of at most ``bucket_bytes`` (a tensor larger than that travels alone in its own bucket), and
each bucket is sent, taken in and freed before the next one is built: between cells as the shard layout
cuts them (``plan_buckets``), into vLLM's workers packed into one flat byte buffer (``packed_buckets``).
So the extra memory a transfer needs on either side is one bucket, and never more than ``bucket_bytes``
plus one tensor.

``plan_buckets`` depends on sizes only, so a sender and a receiver that know the same tensor list (or
the same shard layout) cut the same buckets without exchanging anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

ALIGN = 16  # bytes: every tensor starts at a multiple of this in a packed bucket (any dtype can view it)
MB = 1 << 20


def bucket_bytes_from_mb(bucket_mb: float) -> int:
    """``cluster.weight_sync_bucket_mb`` in bytes (a positive number of MiB)."""
    if not bucket_mb > 0:
        raise ValueError(f"cluster.weight_sync_bucket_mb must be > 0, got {bucket_mb}")
    return max(ALIGN, int(bucket_mb * MB))


def plan_buckets(sizes: Sequence[int], bucket_bytes: int) -> list[range]:
    """Consecutive index ranges of ``sizes`` (bytes per tensor) whose sums stay within ``bucket_bytes``;
    a tensor larger than ``bucket_bytes`` gets a range of its own."""
    if bucket_bytes < 1:
        raise ValueError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
    buckets, start, used = [], 0, 0
    for index, size in enumerate(sizes):
        padded = _aligned(size)
        if index > start and used + padded > bucket_bytes:
            buckets.append(range(start, index))
            start, used = index, 0
        used += padded
    if start < len(sizes):
        buckets.append(range(start, len(sizes)))
    return buckets


@dataclass(frozen=True)
class TensorMeta:
    """Where one tensor lies in a packed bucket; plain values, so it travels through any RPC (msgpack)."""

    name: str
    dtype: str  # torch dtype name without the "torch." prefix
    shape: tuple[int, ...]
    offset: int  # bytes from the bucket's start

    @property
    def nbytes(self) -> int:
        return _numel(self.shape) * torch.empty((), dtype=self.torch_dtype).element_size()

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def as_list(self) -> list:
        return [self.name, self.dtype, list(self.shape), self.offset]

    @classmethod
    def from_list(cls, values: Sequence) -> TensorMeta:
        name, dtype, shape, offset = values
        return cls(str(name), str(dtype), tuple(int(s) for s in shape), int(offset))


def packed_buckets(named: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int,
                   device: str | torch.device = "cpu") -> Iterator[tuple[list[TensorMeta], torch.Tensor]]:
    """Pack a stream of named tensors into flat ``uint8`` buckets of at most ``bucket_bytes`` (a larger
    tensor alone), copying each tensor in as it comes and holding no reference to it: the stream's
    producer may free it at once. Yields each full bucket's layout and bytes."""
    flat: torch.Tensor | None = None
    metas: list[TensorMeta] = []
    used = 0
    for name, tensor in named:
        size = _aligned(tensor.numel() * tensor.element_size())
        if metas and used + size > bucket_bytes:
            yield metas, flat[:used]  # type: ignore[index]
            flat, metas, used = None, [], 0
        if flat is None:
            flat = torch.empty(max(bucket_bytes, size), dtype=torch.uint8, device=device)
        meta = TensorMeta(name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape), used)
        view(flat, meta).copy_(tensor.detach())
        metas.append(meta)
        used += size
        del tensor
    if metas:
        yield metas, flat[:used]  # type: ignore[index]


def view(flat: torch.Tensor, meta: TensorMeta) -> torch.Tensor:
    """The tensor ``meta`` describes, as a view into the packed ``flat`` buffer (no copy)."""
    return flat[meta.offset: meta.offset + meta.nbytes].view(meta.torch_dtype).view(meta.shape)


def unpack(flat: torch.Tensor, metas: Iterable[TensorMeta]) -> list[tuple[str, torch.Tensor]]:
    return [(meta.name, view(flat, meta)) for meta in metas]


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n
