"""Vigenere and XOR ciphers."""

import binascii


def _shifts(key):
    if not key or not key.isalpha() or not key.isascii():
        raise ValueError("key must be non-empty ASCII letters")
    return [ord(ch) - ord("a") for ch in key.lower()]


def _vigenere(text, key, sign):
    shifts, out, k = _shifts(key), [], 0
    for ch in text:
        if ch.isascii() and ch.isalpha():
            base = ord("a") if ch.islower() else ord("A")
            out.append(chr((ord(ch) - base + sign * shifts[k % len(shifts)]) % 26 + base))
            k += 1
        else:
            out.append(ch)
    return "".join(out)


def vigenere_encrypt(text, key):
    return _vigenere(text, key, 1)


def vigenere_decrypt(text, key):
    return _vigenere(text, key, -1)


def xor_bytes(data, key):
    if not key:
        raise ValueError("empty key")
    return bytes(b ^ key[i % len(key)] for i, b in enumerate(data))


def to_hex(data):
    return data.hex()


def from_hex(text):
    try:
        return bytes.fromhex(text)
    except ValueError as exc:
        raise ValueError(f"invalid hex: {text!r}") from exc
