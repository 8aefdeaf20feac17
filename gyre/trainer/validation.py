"""Held-out validation during a run: every held-out task ``val_samples`` times with the current weights,
logged as ``val/*`` and plotted (``gyre.trainer.figures``). The driver starts one every ``val_every`` steps.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import numpy as np

from gyre.harness.execution import is_scorable
from gyre.trainer.figures import plot_curves, plot_validation
from gyre.trainer.step_metrics import rewards_by_domain, tree_shape

if TYPE_CHECKING:
    from gyre.trainer.fit import Driver


async def validate(driver: Driver, step: int) -> dict[str, Any]:
    """Every held-out task ``val_samples`` times with the current weights (never trained on); logged as
    ``val/*`` at ``step`` and plotted into ``val_curve.png``. ``val/pass_rate`` counts full credit (with
    its 95% Wilson interval ``val/pass_rate_ci``: over tasks where each task's repeats all came out alike,
    as under greedy decoding), ``val/score`` is the mean reward (partial credit included). ``val/planned``
    executions were started and ``val/executions`` scored: a benchmark must not read a pass rate whose
    denominator shrank (`gyre.trainer.intervals.check_complete`)."""
    from gyre.trainer.intervals import pass_rate_interval

    version = driver.cluster.version
    futures = [driver.pool.submit(task, group=f"val-{step}", sample_index=index)
               for task in driver.val_tasks for index in range(driver.cfg.val_samples)]
    everything = await asyncio.gather(*futures)
    executions = [e for e in everything if is_scorable(e)]
    rewards = np.asarray([e.reward for e in executions], dtype=float)
    passes = int((rewards >= 1.0).sum())
    task_ids = [e.task_id for e in executions]
    metrics: dict[str, Any] = {
        "val/pass_rate": float((rewards >= 1.0).mean()) if rewards.size else float("nan"),
        "val/pass_rate_ci": list(pass_rate_interval(rewards, task_ids)) if rewards.size else [float("nan")] * 2,
        "val/passes": passes,
        "val/score": float(rewards.mean()) if rewards.size else float("nan"),
        "val/rewards": [float(r) for r in rewards],  # per execution, for intervals of differences
        "val/task_ids": task_ids,  # the task of each reward: repeats of a task are not independent draws
        "val/planned": len(futures),
        "val/unscorable": len(everything) - len(executions),
        "val/executions": len(executions),
        "val/step": step,  # the training steps behind the validated weights
        "val/policy_version": version,
        # Weights that served the calls: other than ``version`` only if training moved on meanwhile.
        "val/call_versions": sorted({call.weight_version for e in executions for call in e.calls}),
    }
    for domain, values in rewards_by_domain(executions).items():
        metrics[f"val/pass_rate/{domain}"] = float(np.mean(np.asarray(values) >= 1.0))
        metrics[f"val/score/{domain}"] = float(np.mean(values))
    metrics.update({f"val/{key}": value for key, value in tree_shape(executions).items()})
    driver.val_history.append({"step": step, **metrics})
    driver.val_history.sort(key=lambda row: row["step"])
    driver.tracker.log(metrics, step=max(step, driver.steps_done))
    driver.curve_rows.append({"step": max(step, driver.steps_done), **metrics})
    plot_validation(driver)
    plot_curves(driver)
    return metrics
