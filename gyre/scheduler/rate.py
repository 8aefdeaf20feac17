"""How fast executions become trainable: a sliding-window meter the observer keeps (the policy has no clock).

Both observers (the driver's buffer and the simulator, each with its own clock) record each group as it
completes and report the rate over the last ``window`` executions, measured up to now: with no completion
for a while the rate decays instead of keeping the last burst's value. A window counted in executions, not
seconds, fits a CPU run (steps of seconds) and a simulated cluster (steps of minutes) alike.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class ReadyRate:
    def __init__(self, window: int, clock: Callable[[], float] = time.monotonic):
        if window < 1:
            raise ValueError(f"the ready-rate window must be >= 1 execution, got {window}")
        self.window = window
        self.clock = clock
        self._events: deque[tuple[float, int]] = deque()  # (time, executions that became ready then)
        self._after_first = 0  # executions recorded after the oldest event kept

    def add(self, executions: int) -> None:
        if executions <= 0:
            return
        if self._events:
            self._after_first += executions
        self._events.append((self.clock(), executions))
        # The oldest event kept starts the window: drop it while what came after the next one fills it.
        while len(self._events) > 1 and self._after_first - self._events[1][1] >= self.window:
            self._events.popleft()
            self._after_first -= self._events[0][1]

    def rate(self) -> float | None:
        """Executions per second since the oldest event in the window; None before two events."""
        if len(self._events) < 2:
            return None
        span = self.clock() - self._events[0][0]
        return self._after_first / span if span > 0 else None
