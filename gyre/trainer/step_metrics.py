"""What the driver logs for a training step beside the trainer's own numbers (``gyre.trainer.metrics``):
rewards and pass rates, executions by status, rollout and model time per execution, how the trees branch,
staleness, each cell's time in its roles, switches. ``rewards_by_domain`` and ``tree_shape`` serve
validation too (``gyre.trainer.validation``).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from gyre.protocol import Execution

if TYPE_CHECKING:
    from gyre.trainer.fit import Driver


def rewards_by_domain(executions: list[Execution]) -> dict[str, list[float]]:
    by_domain: dict[str, list[float]] = defaultdict(list)
    for execution in executions:
        by_domain[execution.domain or "unknown"].append(execution.reward)
    return dict(by_domain)


def model_seconds(execution: Execution) -> float:
    """Seconds an execution spent inside model calls, as the proxy timed them (calls run one at a time)."""
    return float(sum(call.timings.get("proxy_total_s", call.timings.get("total_s", 0.0)) for call in execution.calls))


def tree_shape(executions: list[Execution]) -> dict[str, float]:
    """How the executions' calls branch: ``paths_mean`` (root-to-leaf paths per execution: sub-agents,
    summaries and retries each open one) and ``shared_token_fraction`` (share of the tokens per-path training
    would compute that the prefix-shared trees compute once)."""
    from gyre.trajectory import build_tree

    trees = [build_tree(e.calls, e.id) for e in executions if e.calls]
    if not trees:
        return {}
    path_tokens = sum(tree.path_token_count() for tree in trees)
    return {"paths_mean": float(np.mean([tree.num_paths for tree in trees])),
            "shared_token_fraction": 1.0 - sum(tree.num_tokens for tree in trees) / path_tokens}


def step_metrics(driver: Driver, executions: list[Execution], staleness: list[int]) -> dict[str, Any]:
    """Rollout, reward, staleness and cell-time metrics of a step (the trainer's own come from
    ``logged_train_metrics``)."""
    metrics: dict[str, Any] = {}
    rewards = np.asarray([e.reward for e in executions])
    metrics["reward/mean"] = float(rewards.mean())
    metrics["pass_rate"] = float((rewards >= 1.0).mean())
    for domain, values in rewards_by_domain(executions).items():
        metrics[f"reward/{domain}"] = float(np.mean(values))
        metrics[f"pass_rate/{domain}"] = float(np.mean(np.asarray(values) >= 1.0))
    statuses = [e.status for e in executions]
    metrics["executions/trained"] = sum(1 for e in executions if e.calls)
    metrics["executions/no_calls"] = sum(1 for e in executions if not e.calls)  # left out (trajectory.processor)
    metrics["executions/timeout"] = statuses.count("timeout")
    metrics["executions/crashed"] = statuses.count("crashed")
    nodes = {e.reward_detail["node_id"] for e in executions if "node_id" in e.reward_detail}
    if nodes:  # cluster.execution_nodes > 0: on how many nodes the step's executions ran
        metrics["executions/nodes"] = len(nodes)
    metrics["executions/partial"] = int(((rewards > 0) & (rewards < 1)).sum())
    metrics["executions/finished_since_last_step"] = len(driver.finished_log)
    # Each execution finished since the last step (possibly none: a step can train on executions that
    # finished before the previous one ended): its wall time, split into model-call time and the rest
    # (tools, harness start-up, scoring), and its calls. Same order in every list; the simulator's
    # calibration fits them.
    timed = [f for f in driver.finished_log if math.isfinite(f["seconds"])]
    metrics["rollout/execution_time_s"] = [f["seconds"] for f in timed]
    metrics["rollout/model_time_s"] = [f["model_seconds"] for f in timed]
    metrics["rollout/tool_time_s"] = [max(0.0, f["seconds"] - f["model_seconds"]) for f in timed]
    metrics["rollout/execution_calls"] = [f["calls"] for f in timed]
    if timed:
        metrics["rollout/execution_time_mean_s"] = float(np.mean(metrics["rollout/execution_time_s"]))
    metrics["rollout/calls_per_execution"] = [len(e.calls) for e in executions]
    # Wall seconds of each execution this step trained (benchmarks/schedulers.py: work trained per hour,
    # and its length bias against rollout/execution_time_s, every execution that finished)
    metrics["train/execution_time_s"] = [e.reward_detail.get("wall_s", float("nan")) for e in executions]
    metrics["rollout/calls_per_execution_mean"] = float(np.mean([len(e.calls) for e in executions]))
    # How the step's executions branched, before trajectory.max_paths (what was trained: tokens/*)
    metrics.update({f"trees/{key}": value for key, value in tree_shape(executions).items()})
    metrics["staleness/mean"] = float(np.mean(staleness)) if staleness else 0.0
    metrics["staleness/max"] = int(max(staleness)) if staleness else 0
    metrics["step_time_s"] = time.perf_counter() - driver.last_step_end
    metrics["dropped_stale"] = driver.buffer.dropped_stale
    metrics["aborted_stale"] = driver.buffer.aborted
    metrics["unscorable"] = driver.buffer.unscorable
    metrics["executions/lost"] = driver.lost
    for cell, roles in driver.cluster.seconds_in_roles().items():
        for role, secs in roles.items():
            metrics[f"cells/{cell}/{role}_s"] = secs
    total = sum(driver.role_seconds.values())
    if total:
        metrics["idle_fraction"] = sum(driver.idle_seconds.values()) / total
        for role in driver.role_seconds:
            if driver.role_seconds[role]:
                metrics[f"idle_fraction/{role}"] = driver.idle_seconds[role] / driver.role_seconds[role]
    switches = driver.cluster.switch_log
    for kind in ("rollout_to_train_s", "train_to_rollout_s"):
        values = [s["seconds"] for s in switches if s["kind"] == kind]
        if values:
            metrics[f"switch/{kind}"] = float(np.mean(values))
    metrics["switch/count"] = len(switches)
    metrics["cells"] = len(driver.cluster.ids)
    metrics["cells/capacity"] = driver.cluster.cfg.capacity
    metrics["group_size"] = driver.cfg.group_size
    cfg = driver.policy.cfg
    metrics["scheduler"] = {"name": driver.policy.name, "batch_size": cfg.batch_size,
                            "max_staleness": cfg.max_staleness, "stale_policy": cfg.stale_policy,
                            "rollout_cells": cfg.rollout_cells}
    return metrics
