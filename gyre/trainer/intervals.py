"""95% intervals for pass rates measured over executions, and the check that a validation ran them all.

A held-out pass rate is a proportion over n executions: `wilson` gives its score interval (good at small n
and near 0 or 1, where the normal approximation is not). With 192 executions a pass rate near 0.3 is known to
about +/- 0.065.

A validation runs each task several times, and those runs are not always independent draws:
`pass_rate_interval` counts a task's repeats once where they all scored alike on every task (greedy decoding
repeats one execution: 4 copies of 48 tasks are 48 observations, not 192), and every execution otherwise.

A gain compares two validations of one task set: `bootstrap_paired_by_task` resamples the tasks, each with
all its executions on both sides, so the interval carries the spread between tasks and their pairing (a task
hard before is likely hard after), neither of which a resampling of executions as independent draws sees.
Seeded, so a figure is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


class IncompleteValidation(RuntimeError):
    """A validation scored fewer executions than it planned: its pass rate would be over a smaller,
    possibly biased denominator."""


def wilson(passes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``passes`` successes out of ``n``."""
    if n <= 0:
        raise ValueError(f"an interval needs at least one execution, got n={n}")
    if not 0 <= passes <= n:
        raise ValueError(f"passes must be in [0, n={n}], got {passes}")
    p = passes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def repeats_agree(rewards: Sequence[float], task_ids: Sequence[str]) -> bool:
    """Whether every task's executions all passed or all failed (as greedy decoding's copies do)."""
    outcomes: dict[str, set[bool]] = {}
    for reward, task in zip(rewards, task_ids, strict=True):
        outcomes.setdefault(task, set()).add(reward >= 1.0)
    return all(len(seen) == 1 for seen in outcomes.values())


def pass_rate_interval(rewards: Sequence[float], task_ids: Sequence[str] | None = None) -> tuple[float, float]:
    """Wilson interval of the full-credit share of ``rewards``; over tasks, not executions, where ``task_ids``
    shows that each task's repeats all came out alike (copies add no observation)."""
    passed = [reward >= 1.0 for reward in rewards]
    if task_ids is not None and len(set(task_ids)) < len(passed) and repeats_agree(rewards, task_ids):
        by_task = dict(zip(task_ids, passed, strict=True))
        return wilson(sum(by_task.values()), len(by_task))
    return wilson(sum(passed), len(passed))


def bootstrap_paired_by_task(after: Sequence[float], after_tasks: Sequence[str], before: Sequence[float],
                             before_tasks: Sequence[str], resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(after) - mean(before) over the same tasks: each resample draws
    tasks with replacement and takes all of each drawn task's executions on both sides."""
    sides = []
    for values, tasks in ((after, after_tasks), (before, before_tasks)):
        grouped: dict[str, list[float]] = {}
        for value, task in zip(values, tasks, strict=True):
            grouped.setdefault(task, []).append(float(value))
        sides.append(grouped)
    if set(sides[0]) != set(sides[1]) or not sides[0]:
        raise ValueError(f"a paired difference needs the same tasks on both sides: {len(set(sides[0]) ^ set(sides[1]))} "
                         f"tasks are on one side only ({len(sides[0])} after, {len(sides[1])} before)")
    order = sorted(sides[0])
    # per task: sum of passes and executions, on each side; a resample's rate is the ratio of drawn sums
    sums = np.array([[sum(side[t]) for t in order] for side in sides])
    counts = np.array([[len(side[t]) for t in order] for side in sides], dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(order), (resamples, len(order)))
    rates = sums[:, draws].sum(-1) / counts[:, draws].sum(-1)
    low, high = np.quantile(rates[0] - rates[1], [0.025, 0.975])
    return float(low), float(high)


def check_complete(row: dict, where: str) -> None:
    """Raise `IncompleteValidation` unless validation ``row`` (a ``val/*`` metrics row) scored every execution
    it planned."""
    planned, scored = row.get("val/planned"), row.get("val/executions")
    if planned is None or scored is None:
        raise IncompleteValidation(f"{where}: validation at step {row.get('val/step')} does not say how many executions "
                                   "it planned (val/planned) and scored (val/executions)")
    if scored != planned:
        raise IncompleteValidation(
            f"{where}: validation at step {row.get('val/step')} scored {scored} of the {planned} executions it planned "
            f"({row.get('val/unscorable', planned - scored)} unscorable or lost); its pass rate would be over a smaller "
            "denominator: see the run's executions/ for why")
