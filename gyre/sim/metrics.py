"""A simulated run's per-step metrics in the schema of the real run's jsonl (``gyre/tracking.py``).

Writing the simulator's steps in the same format as a real run lets one tool read both: ``calibrate.py``
fits a preset from either, and a simulated run can be compared with the real one line by line. The schema
is documented in ``gyre/sim/calibrate.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from gyre.sim.engine import Simulator


def step_records(sim: Simulator) -> list[dict[str, Any]]:
    """One record per completed training step."""
    table, cfg = sim.table, sim.root.sim
    records: list[dict[str, Any]] = []
    previous_end = 0.0
    for index, step in enumerate(sim.step_log):
        if "end" not in step:
            break
        ids = np.asarray(step["ids"], dtype=np.int64)
        window = [kind for when, kind in sim.switch_log if previous_end <= when < step["end"]]
        seconds = table.finish_t[ids] - table.dispatch_t[ids]
        calls = table.calls[ids].astype(int).tolist()  # every execution trained here finished here too
        records.append({
            "step": index,
            "step_time_s": step["end"] - previous_end,
            "train/time_s": step["end"] - step["start"],
            "rollout/execution_time_s": seconds.tolist(),
            "rollout/tool_time_s": table.tool_s[ids].tolist(),
            "rollout/model_time_s": (seconds - table.tool_s[ids]).tolist(),
            "rollout/execution_calls": calls,
            "rollout/calls_per_execution": calls,
            "tokens/tree": step["tree_tokens"] * sim.train.tree_ratio,
            "tokens/policy": step["policy_tokens"] * sim.train.tree_ratio,
            "switch/rollout_to_train_s": cfg.switch.rollout_to_train_s if "rollout_to_train" in window else None,
            "switch/train_to_rollout_s": cfg.switch.train_to_rollout_s if "train_to_rollout" in window else None,
            "train/cells": step["cells"],
            "cells": cfg.cells,
            "cells/capacity": sim.cap,
            "group_size": sim.group_size,
            "scheduler": {"name": sim.sched.name, "batch_size": sim.sched.batch_size,
                          "max_staleness": sim.sched.max_staleness, "stale_policy": sim.sched.stale_policy,
                          "rollout_cells": sim.sched.rollout_cells},
        })
        previous_end = step["end"]
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
