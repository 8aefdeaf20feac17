"""95% intervals for pass rates measured over executions, and the check that a validation ran them all.

A held-out pass rate is a proportion over n executions: `wilson` gives its score interval (good at small n
and near 0 or 1, where the normal approximation is not). A gain is a difference of two independent pass
rates: `bootstrap_difference` resamples each side's executions (seeded, so a figure is reproducible).
With 192 executions a pass rate near 0.3 is known to about +/- 0.065; a gain between two such
validations to about +/- 0.09.
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


def bootstrap_difference(after: Sequence[float], before: Sequence[float], resamples: int = 10_000,
                         seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(after) - mean(before), resampling the executions of each side."""
    a, b = np.asarray(after, dtype=float), np.asarray(before, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"a difference needs executions on both sides, got {a.size} and {b.size}")
    rng = np.random.default_rng(seed)
    diffs = a[rng.integers(0, a.size, (resamples, a.size))].mean(1) - b[rng.integers(0, b.size, (resamples, b.size))].mean(1)
    low, high = np.quantile(diffs, [0.025, 0.975])
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
