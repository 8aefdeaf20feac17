"""The trainer's raw step statistics under the names the run logs (each metric has one name; the table of
every name is in gyre/tracking.py).

The cells report what they measured under short names (``train_time_s``, ``tree_tokens``, ...); the run
logs them namespaced (``train/time_s``, ``tokens/tree``, ...), which is what the simulator's calibration,
benchmarks and ``gyre.compare`` read.
"""

from __future__ import annotations

from typing import Any

LOGGED_AS = {
    "train_time_s": "train/time_s",
    "fwd_bwd_s": "train/fwd_bwd_s",
    "weight_sync_s": "train/weight_sync_s",
    "trainer_members": "train/cells",
    "tree_tokens": "tokens/tree",
    "path_tokens": "tokens/path",
    "policy_tokens": "tokens/policy",
    "cells_lost": "cells/lost",
    "cells_replaced": "cells/replaced",
    "microbatches_redone": "cells/microbatches_redone",
}


def logged_train_metrics(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (from ``Cluster.train_step``) renamed for logging. ``pg_loss`` is kept only when a KL or
    entropy term makes ``loss`` differ from it; otherwise it would be ``loss`` a second time."""
    metrics = {LOGGED_AS.get(key, key): value for key, value in raw.items()}
    if "kl" not in raw and "entropy" not in raw:
        metrics.pop("pg_loss", None)
    return metrics
