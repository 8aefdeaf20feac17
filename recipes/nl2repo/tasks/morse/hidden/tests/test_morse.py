import pytest

from morse import CODES, decode, encode


def test_codes_table():
    assert len(CODES) == 36
    assert CODES["S"] == "..."


def test_encode_sos():
    assert encode("sos") == "... --- ..."


def test_encode_words():
    assert encode("Hi  there") == ".... .. / - .... . .-. ."


def test_decode():
    assert decode(".... .. / - .... . .-. .") == "HI THERE"


def test_round_trip_digits():
    assert decode(encode("route 66")) == "ROUTE 66"


def test_errors():
    with pytest.raises(ValueError):
        encode("hi!")
    with pytest.raises(ValueError):
        decode("......")
