"""What every rank of a cell is built from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CellConfig:
    cell_id: str
    is_core: bool
    model_path: str = "tiny"
    dtype: str = "float32"  # model dtype: the replica computes in it (below float32: on float32 master weights); weights move between cells in it
    device: str = "cpu"  # torch device of the training replica
    rollout: dict[str, Any] = field(default_factory=lambda: {"kind": "hf"})  # the rollout config group
    ranks: int = 1  # processes of the cell; > 1 shards the training replica over them with FSDP2
    reference_path: str | None = None  # a frozen reference model (algo.kl_coef > 0), sharded like the policy
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    loss: dict[str, Any] = field(default_factory=dict)
    step: dict[str, Any] = field(default_factory=dict)
    torch_threads: int = 1
    bucket_mb: float = 256.0  # cluster.weight_sync_bucket_mb: weights move between cells in buckets of this size
    reshard_after_forward: bool = False  # cluster.fsdp_reshard_after_forward: sharded rounds layer by layer (gyre.replica.sharding)
