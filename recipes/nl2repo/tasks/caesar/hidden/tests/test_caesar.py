import pytest

from caesar import crack, rot13, shift, unshift


def test_shift_wraps():
    assert shift("xyz", 3) == "abc"


def test_shift_keeps_case_and_symbols():
    assert shift("Hello, World!", 1) == "Ifmmp, Xpsme!"


def test_negative_and_large_keys():
    assert shift("abc", -1) == "zab"
    assert shift("abc", 27) == "bcd"


def test_unshift_inverts():
    assert unshift(shift("Secret msg", 11), 11) == "Secret msg"


def test_rot13_twice():
    assert rot13("Gyre") == "Tler"
    assert rot13(rot13("Gyre")) == "Gyre"


def test_crack():
    assert crack(shift("attack at dawn", 7), "dawn") == 7


def test_crack_fails():
    with pytest.raises(ValueError):
        crack("zzz", "hello")
