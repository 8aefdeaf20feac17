import pytest

from units import convert, parse, to_feet_inches


def test_metric():
    assert convert(1.5, "km", "m") == 1500
    assert convert(25, "MM", "cm") == 2.5


def test_imperial():
    assert convert(1, "ft", "in") == 12
    assert convert(1, "mi", "km") == 1.609344


def test_unknown_unit():
    with pytest.raises(ValueError):
        convert(1, "league", "m")


def test_parse():
    assert parse("12.5 km") == (12.5, "km")
    assert parse("3FT") == (3.0, "ft")
    with pytest.raises(ValueError):
        parse("far")


def test_feet_inches():
    assert to_feet_inches(1.8) == "5' 11\""
    assert to_feet_inches(0.3048) == "1' 0\""
