import pytest

from bits import bit_string, is_power_of_two, parity, popcount, reverse


def test_popcount():
    assert popcount(0) == 0
    assert popcount(0b1011) == 3


def test_parity():
    assert parity(0b111) == 1
    assert parity(0b11) == 0


def test_reverse():
    assert reverse(0b0011, 4) == 0b1100
    assert reverse(1, 8) == 128


def test_reverse_too_wide():
    with pytest.raises(ValueError):
        reverse(16, 4)


def test_bit_string():
    assert bit_string(5) == "101"
    assert bit_string(5, 8) == "00000101"


def test_power_of_two():
    assert is_power_of_two(64)
    assert not is_power_of_two(0)
    assert not is_power_of_two(12)


def test_negative():
    for fn in (popcount, parity, is_power_of_two, bit_string):
        with pytest.raises(ValueError):
            fn(-1)
