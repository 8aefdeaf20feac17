import pytest

from cipherkit import from_hex, to_hex, vigenere_decrypt, vigenere_encrypt, xor_bytes


def test_vigenere_classic():
    assert vigenere_encrypt("ATTACKATDAWN", "LEMON") == "LXFOPVEFRNHR"


def test_vigenere_keeps_case_and_symbols():
    assert vigenere_encrypt("Hi, you!", "ab") == "Hj, ypu!"


def test_vigenere_round_trip():
    assert vigenere_decrypt(vigenere_encrypt("Secret Plans 42", "Key"), "kEY") == "Secret Plans 42"


def test_bad_key():
    with pytest.raises(ValueError):
        vigenere_encrypt("x", "k3y")


def test_xor_round_trip():
    data = b"hello world"
    assert xor_bytes(xor_bytes(data, b"k"), b"k") == data
    assert xor_bytes(b"\x00\x01", b"\xff") == b"\xff\xfe"
    with pytest.raises(ValueError):
        xor_bytes(b"x", b"")


def test_hex():
    assert to_hex(b"\x01\xab") == "01ab"
    assert from_hex("01AB") == b"\x01\xab"
    with pytest.raises(ValueError):
        from_hex("zz")
