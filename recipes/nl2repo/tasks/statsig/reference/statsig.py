"""Running statistics (Welford)."""

import math


class Running:
    def __init__(self):
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._min = math.inf
        self._max = -math.inf

    def add(self, x):
        self._n += 1
        delta = x - self._mean
        self._mean += delta / self._n
        self._m2 += delta * (x - self._mean)
        self._min = min(self._min, x)
        self._max = max(self._max, x)
        return self

    def extend(self, values):
        for x in values:
            self.add(x)
        return self

    @property
    def count(self):
        return self._n

    def _need(self, n):
        if self._n < n:
            raise ValueError("not enough data")

    @property
    def mean(self):
        self._need(1)
        return self._mean

    @property
    def variance(self):
        self._need(2)
        return self._m2 / (self._n - 1)

    @property
    def stdev(self):
        return math.sqrt(self.variance)

    @property
    def minimum(self):
        self._need(1)
        return self._min

    @property
    def maximum(self):
        self._need(1)
        return self._max

    def merge(self, other):
        out = Running()
        n = self._n + other._n
        if n == 0:
            return out
        delta = other._mean - self._mean
        out._n = n
        out._mean = self._mean + delta * other._n / n
        out._m2 = self._m2 + other._m2 + delta * delta * self._n * other._n / n
        out._min = min(self._min, other._min)
        out._max = max(self._max, other._max)
        return out
