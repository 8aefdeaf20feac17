import pytest

from temperature import convert, parse


def test_c_to_f():
    assert convert(100, "C", "F") == 212


def test_f_to_c():
    assert convert(-40, "F", "C") == -40


def test_k_to_c():
    assert convert(0, "K", "C") == -273.15


def test_case_insensitive():
    assert convert(0, "c", "k") == 273.15


def test_unknown_scale():
    with pytest.raises(ValueError):
        convert(1, "X", "C")


def test_below_absolute_zero():
    with pytest.raises(ValueError):
        convert(-300, "C", "F")


def test_parse():
    assert parse("21.5C") == (21.5, "C")
    assert parse("-40 F") == (-40.0, "F")
    assert parse("300k") == (300.0, "K")


def test_parse_bad():
    with pytest.raises(ValueError):
        parse("hot")
