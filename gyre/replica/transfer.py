"""Weights and gradients between cells through torch.distributed process groups, never through the driver.

A ``Transfer`` is one movement between cells: a joining satellite pulls the core's weights, a leaving one
sends its gradients to the core, the core sends new weights to every other cell. It goes shard to shard:
rank r of every cell taking part joins the group of rank r, so a cell of N ranks moves its N shards over N
groups at once, each shard flat in the model's dtype.

Groups belong to an epoch of the cluster (``Cluster.epoch``: it counts the bulk role switches, one per
``Cluster.switch_many``, not the changes of the membership record's ``Membership.version``):
``ProcessGroupGloo`` (CPU) or ``ProcessGroupNCCL`` (GPU) over a ``PrefixStore`` named after the epoch,
the purpose, the cells and the rank, on one TCPStore the driver hosts. A group is made the first time a
transfer needs it and serves every later transfer of the same purpose and cells while that epoch lasts
(steps with no role change in between share their weight-sync group). The first transfer of a newer epoch
that reaches a rank shuts down that rank's groups of older epochs (``GroupRegistry``): live groups stay
bounded however many switches a run makes.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gyre.ports import free_ports

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Transfer:
    """Who takes part in one movement (the root first: it sends, or receives a reduction), in which epoch
    of the cluster, and where the store is."""

    epoch: int  # the cluster's epoch (``Cluster.epoch``): bulk role switches so far; its groups end with it
    purpose: str  # join | leave | reduce | sync: groups of different purposes never mix
    cells: tuple[str, ...]
    host: str
    port: int
    backend: str = "gloo"
    timeout_s: float = 300.0

    @property
    def world_size(self) -> int:
        return len(self.cells)

    def rank_of(self, cell_id: str) -> int:
        return self.cells.index(cell_id)

    def group_name(self, local_rank: int) -> str:
        members = hashlib.sha1(",".join(self.cells).encode()).hexdigest()[:12]
        return f"gyre/m{self.epoch}/{self.purpose}/{members}/r{local_rank}"


def host_store(host: str = "127.0.0.1", port: int | None = None) -> tuple[dist.TCPStore, int]:
    """The driver's store; keep the returned object alive for the whole run."""
    port = port or free_ports(1, host)[0]
    store = dist.TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
    return store, port


def make_group(name: str, rank: int, world_size: int, host: str, port: int, backend: str = "gloo",
               timeout_s: float = 300.0) -> dist.ProcessGroup:
    """Join the process group ``name`` (blocks until every rank has joined). Each group gets its own connection
    to the store: a client blocked in one group's rendezvous holds its socket, so two groups joined at once
    from two threads of one process (the core in a bulk switch) must not share one."""
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.PrefixStore(name, dist.TCPStore(host, port, is_master=False, timeout=timeout))
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, world_size, timeout)
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, world_size, options)
    raise ValueError(f"cluster.backend must be 'gloo' or 'nccl', got {backend!r}")


class GroupRegistry:
    """One process's transfer groups, by name; groups of a cluster epoch end when a newer one arrives."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[int, dist.ProcessGroup]] = {}
        self._lock = threading.Lock()
        self.made = 0  # groups made over this process's life
        self.ended = 0  # groups whose shutdown ran (a failed one is not counted: its connections may live on)
        self.failed_shutdowns = 0

    def group(self, transfer: Transfer, cell_id: str, local_rank: int) -> dist.ProcessGroup:
        self.end_before(transfer.epoch)
        name = transfer.group_name(local_rank)
        with self._lock:
            known = self._groups.get(name)
        if known is not None:
            return known[1]
        # Made outside the lock: joining blocks until the other cells' ranks arrive.
        group = make_group(name, transfer.rank_of(cell_id), transfer.world_size, transfer.host, transfer.port,
                           transfer.backend, transfer.timeout_s)
        with self._lock:
            self._groups[name] = (transfer.epoch, group)
            self.made += 1
        return group

    def end_before(self, epoch: int) -> None:
        """Shut down every group of a cluster epoch older than ``epoch``."""
        self._end(lambda e: e < epoch)

    def close(self) -> None:
        self._end(lambda v: True)

    def _end(self, ended: Callable[[int], bool]) -> None:
        with self._lock:
            names = [name for name, (v, _) in self._groups.items() if ended(v)]
            groups = [self._groups.pop(name)[1] for name in names]
        done = [shutdown_group(group) for group in groups]
        with self._lock:
            self.ended += sum(done)
            self.failed_shutdowns += len(done) - sum(done)

    @property
    def live(self) -> int:
        with self._lock:
            return len(self._groups)


def shutdown_group(group: dist.ProcessGroup) -> bool:
    """Release a group's connections now (NCCL communicators are not freed by garbage collection); False
    where the backend has no shutdown or it failed (dropping the group is then all there is)."""
    try:
        group.shutdown()
    except (RuntimeError, NotImplementedError) as error:
        log.warning("transfer group shutdown failed (%s: %s); its connections are left to garbage collection",
                    type(error).__name__, error)
        return False
    return True


def broadcast(group: dist.ProcessGroup, flat: torch.Tensor, root: int) -> torch.Tensor:
    """Every rank's ``flat`` becomes the root's (in place); returns it."""
    opts = dist.BroadcastOptions()
    opts.rootRank = root
    group.broadcast([flat], opts).wait()
    return flat


def reduce_sum(group: dist.ProcessGroup, flat: torch.Tensor, root: int) -> torch.Tensor:
    """Sum ``flat`` over the group into the root's copy (returned on every rank; only the root's is the sum)."""
    flat = flat.contiguous()
    opts = dist.ReduceOptions()
    opts.rootRank = root
    opts.reduceOp = dist.ReduceOp.SUM
    group.reduce([flat], opts).wait()
    return flat
