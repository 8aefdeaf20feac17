import statistics

import pytest

from statsig import Running

DATA = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]


def test_mean_and_variance():
    r = Running().extend(DATA)
    assert r.count == 8
    assert r.mean == pytest.approx(5.0)
    assert r.variance == pytest.approx(statistics.variance(DATA))
    assert r.stdev == pytest.approx(statistics.stdev(DATA))


def test_min_max_and_chaining():
    r = Running().add(3).add(-1).add(2)
    assert (r.minimum, r.maximum) == (-1, 3)


def test_empty_errors():
    with pytest.raises(ValueError):
        Running().mean
    with pytest.raises(ValueError):
        Running().add(1).variance


def test_merge_with_empty():
    r = Running().extend([1.0, 3.0]).merge(Running())
    assert (r.count, r.mean) == (2, 2.0)
    assert Running().merge(Running()).count == 0


def test_merge():
    a = Running().extend(DATA[:3])
    b = Running().extend(DATA[3:])
    merged = a.merge(b)
    assert merged.count == 8
    assert merged.mean == pytest.approx(5.0)
    assert merged.variance == pytest.approx(statistics.variance(DATA))
    assert merged.maximum == 9.0
