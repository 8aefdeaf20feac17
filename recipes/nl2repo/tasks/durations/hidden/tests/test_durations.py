import pytest

import durations


def test_parse_combined():
    assert durations.parse("1h30m") == 5400


def test_parse_spaces_and_case():
    assert durations.parse("1H 5m 10S") == 3910


def test_parse_days_and_bare_seconds():
    assert durations.parse("2d") == 172800
    assert durations.parse("42") == 42


@pytest.mark.parametrize("bad", ["", "5x", "1m1h", "1h1h", "h", "3h xx"])
def test_parse_bad(bad):
    with pytest.raises(ValueError):
        durations.parse(bad)


def test_format():
    assert durations.format(5400) == "1h30m"
    assert durations.format(90061) == "1d1h1m1s"
    assert durations.format(0) == "0s"


def test_format_negative():
    with pytest.raises(ValueError):
        durations.format(-1)


def test_round_trip():
    for value in (1, 59, 3600, 86399, 200000):
        assert durations.parse(durations.format(value)) == value
