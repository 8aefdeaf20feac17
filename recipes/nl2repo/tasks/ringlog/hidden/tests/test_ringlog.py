import pytest

from ringlog import RingLog


def test_keeps_latest():
    log = RingLog(2)
    for i in range(3):
        log.log("info", f"m{i}")
    assert log.records() == [(2, "INFO", "m1"), (3, "INFO", "m2")]
    assert log.dropped == 1


def test_level_filter():
    log = RingLog(5)
    log.log("DEBUG", "a")
    log.log("error", "b")
    log.log("Warning", "c")
    assert log.records("warning") == [(2, "ERROR", "b"), (3, "WARNING", "c")]


def test_bad_level_and_capacity():
    with pytest.raises(ValueError):
        RingLog(1).log("TRACE", "x")
    with pytest.raises(ValueError):
        RingLog(0)


def test_dropped_counts_every_overflow():
    log = RingLog(1)
    for i in range(4):
        log.log("debug", str(i))
    assert log.dropped == 3
    assert log.records() == [(4, "DEBUG", "3")]


def test_clear_keeps_numbering():
    log = RingLog(3)
    log.log("info", "a")
    log.clear()
    log.log("info", "b")
    assert log.records() == [(2, "INFO", "b")]
