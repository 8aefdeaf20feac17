"""Weights and gradients between cells through torch.distributed process groups, never through the driver.

Elastic membership means the set of cells that must talk changes mid-step. Instead of one global process
group, every membership change gets a fresh group: ``ProcessGroupGloo`` (CPU) or ``ProcessGroupNCCL``
(GPU) over ``PrefixStore("gyre/v{version}", store)`` on a single TCPStore that the driver hosts. A group is
only ever used by the ranks it was made for, so a stale group can never mix two memberships' tensors.
"""

from __future__ import annotations

import datetime
import socket
import threading
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector


@dataclass(frozen=True)
class GroupSpec:
    """A process group to join: which membership version, my rank, the size, and where the store is."""

    version: int
    rank: int
    world_size: int
    host: str
    port: int
    backend: str = "gloo"
    timeout_s: float = 300.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def host_store(host: str = "127.0.0.1", port: int | None = None) -> tuple[dist.TCPStore, int]:
    """The driver's store; keep the returned object alive for the whole run."""
    port = port or free_port(host)
    store = dist.TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
    return store, port


# One store client per thread: a client serialises its requests on one socket, so two ranks joining from two
# threads of one process (tests, a local cell pair) would queue one rank's ``set`` behind the other's blocking
# ``wait`` for it and time out.
_client_stores = threading.local()


def make_group(spec: GroupSpec) -> dist.ProcessGroup:
    """Join the process group of ``spec.version`` (blocks until every rank has joined)."""
    key = (spec.host, spec.port)
    clients = _client_stores.__dict__.setdefault("by_address", {})
    if key not in clients:
        clients[key] = dist.TCPStore(spec.host, spec.port, is_master=False, timeout=datetime.timedelta(seconds=spec.timeout_s))
    store = dist.PrefixStore(f"gyre/v{spec.version}", clients[key])
    timeout = datetime.timedelta(seconds=spec.timeout_s)
    if spec.backend == "gloo":
        return dist.ProcessGroupGloo(store, spec.rank, spec.world_size, timeout)
    if spec.backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, spec.rank, spec.world_size, options)
    raise ValueError(f"cell.backend must be 'gloo' or 'nccl', got {spec.backend!r}")


def flat_params(model: torch.nn.Module) -> torch.Tensor:
    return parameters_to_vector(model.parameters()).detach()


def flat_grads(model: torch.nn.Module) -> torch.Tensor:
    """All gradients as one vector (zeros where a parameter received none)."""
    return torch.cat([
        (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in model.parameters()
    ]).detach()


def set_flat_grads(model: torch.nn.Module, flat: torch.Tensor) -> None:
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n


def broadcast(group: dist.ProcessGroup, flat: torch.Tensor, root: int) -> torch.Tensor:
    """Every rank's ``flat`` becomes the root's (in place); returns it."""
    opts = dist.BroadcastOptions()
    opts.rootRank = root
    group.broadcast([flat], opts).wait()
    return flat


def load_flat_params(model: torch.nn.Module, flat: torch.Tensor) -> None:
    """Copy ``flat`` into the parameters in place. (``vector_to_parameters`` swaps each ``param.data`` for
    a view of ``flat``, which frees storage a forward running on another thread may still be reading.)"""
    offset = 0
    with torch.no_grad():
        for param in model.parameters():
            n = param.numel()
            param.copy_(flat[offset : offset + n].view_as(param))
            offset += n


def broadcast_params(group: dist.ProcessGroup, model: torch.nn.Module, root: int) -> None:
    """Every rank ends with the root's parameters. The root only sends: it never writes its own, so the
    core can keep training on them while a satellite joining mid-step pulls them."""
    flat = broadcast(group, flat_params(model).contiguous(), root)
    if group.rank() != root:
        load_flat_params(model, flat)


def reduce_grads(group: dist.ProcessGroup, flat: torch.Tensor, root: int) -> torch.Tensor:
    """Sum ``flat`` over the group into the root's copy (returned on every rank; only the root's is the sum)."""
    flat = flat.contiguous()
    opts = dist.ReduceOptions()
    opts.rootRank = root
    opts.reduceOp = dist.ReduceOp.SUM
    group.reduce([flat], opts).wait()
    return flat
