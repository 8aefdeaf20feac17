"""When a session waiting on a tool gives back its engine slot: the park rule (pure: no clock, no I/O).

A session whose model call has returned is in a tool until its next call. Parking it frees its KV slot (the
KV goes to host memory, or is dropped and its prefix recomputed); its next call then pays a restore, on
whichever rollout cell it lands. Parking pays when the gap outlasts the restore, and the gap is not known
when the call returns, so it is predicted from the session's own gaps so far (the mean of the last
``window``), or from a prior (the gaps of every session so far) before it has any, as MORI does. A session
whose cell is chosen to train is parked whatever the rule says: that is the driver's action, not this rule.

The router (one session at a time, ``should_park``) and the simulator (every call of many executions at once,
``park_gaps``) use this same rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ParkRule:
    window: int = 4  # past gaps of the session its next gap is predicted from (their mean)
    prior_s: float = 0.0  # the predicted gap before the session has any history (e.g. the mean gap of all sessions)

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"park rule: window must be >= 1 past gap, got {self.window}")
        if self.prior_s < 0:
            raise ValueError(f"park rule: prior_s must be >= 0, got {self.prior_s}")

    def predicted_gap(self, history: Sequence[float]) -> float:
        """The session's next tool gap: the mean of its last ``window`` gaps, else the prior."""
        recent = list(history)[-self.window:]
        return sum(recent) / len(recent) if recent else self.prior_s

    def should_park(self, history: Sequence[float], restore_s: float) -> bool:
        """Park a session whose call just returned: its predicted gap exceeds what restoring it will cost."""
        return self.predicted_gap(history) > restore_s

    def park_gaps(self, gaps: np.ndarray, starts: np.ndarray, restore_s: np.ndarray) -> np.ndarray:
        """Whether each gap is parked, for many sessions at once: ``gaps`` holds every session's gaps in call
        order, one session after another, ``starts`` the index of each session's first gap, ``restore_s`` the
        restore cost at each gap. Each decision sees only that session's earlier gaps (``should_park``)."""
        gaps = np.asarray(gaps, dtype=float)
        restore_s = np.asarray(restore_s, dtype=float)
        if gaps.shape != restore_s.shape:
            raise ValueError(f"park_gaps: {gaps.shape[0]} gaps but {restore_s.shape[0]} restore costs")
        if len(gaps) == 0:
            return np.zeros(0, dtype=bool)
        index = np.arange(len(gaps))
        first = np.zeros(len(gaps), dtype=np.int64)
        first[np.asarray(starts, dtype=np.int64)] = np.asarray(starts, dtype=np.int64)
        first = np.maximum.accumulate(first)  # each gap's session start
        total = np.concatenate(([0.0], np.cumsum(gaps)))  # total[j] = sum of gaps before j
        begin = np.maximum(first, index - self.window)
        seen = index - begin
        mean = np.where(seen > 0, (total[index] - total[begin]) / np.maximum(seen, 1), self.prior_s)
        return mean > restore_s
