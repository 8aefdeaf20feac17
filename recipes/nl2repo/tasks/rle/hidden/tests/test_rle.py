import pytest

from rle import decode, encode


def test_encode_runs():
    assert encode("aaabcc") == "3a1b2c"


def test_encode_empty():
    assert encode("") == ""


def test_decode_runs():
    assert decode("3a1b2c") == "aaabcc"


def test_decode_multi_digit():
    assert decode("12a") == "a" * 12


def test_round_trip():
    text = "wwwwaaadexxxxxx"
    assert decode(encode(text)) == text


def test_decode_missing_count():
    with pytest.raises(ValueError):
        decode("a3b")


def test_decode_trailing_count():
    with pytest.raises(ValueError):
        decode("3a4")


def test_encode_rejects_digits():
    with pytest.raises(ValueError):
        encode("a1")
