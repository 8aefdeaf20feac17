import pytest

from baseconv import from_base, to_base


def test_binary():
    assert to_base(10, 2) == "1010"


def test_hex_and_36():
    assert to_base(255, 16) == "ff"
    assert to_base(35, 36) == "z"


def test_zero_and_negative():
    assert to_base(0, 7) == "0"
    assert to_base(-10, 2) == "-1010"


def test_from_base():
    assert from_base("FF", 16) == 255
    assert from_base("-1010", 2) == -10


def test_round_trip():
    for n in (1, 42, 12345, -999):
        for base in (2, 8, 10, 36):
            assert from_base(to_base(n, base), base) == n


def test_invalid_digit():
    with pytest.raises(ValueError):
        from_base("12", 2)
    with pytest.raises(ValueError):
        from_base("", 10)


def test_invalid_base():
    with pytest.raises(ValueError):
        to_base(1, 1)
    with pytest.raises(ValueError):
        from_base("1", 37)
