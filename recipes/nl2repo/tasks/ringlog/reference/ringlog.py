"""A bounded log buffer."""

from collections import deque

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class RingLog:
    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._records = deque(maxlen=capacity)
        self._next = 1
        self.dropped = 0

    def log(self, level, message):
        level = level.upper()
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}")
        if len(self._records) == self._records.maxlen:
            self.dropped += 1
        self._records.append((self._next, level, message))
        self._next += 1

    def records(self, min_level="DEBUG"):
        floor = LEVELS.index(min_level.upper())
        return [r for r in self._records if LEVELS.index(r[1]) >= floor]

    def clear(self):
        self._records.clear()
