"""Caesar and ROT13 ciphers."""

import string


def shift(text, key):
    key %= 26
    out = []
    for ch in text:
        for alphabet in (string.ascii_lowercase, string.ascii_uppercase):
            if ch in alphabet:
                out.append(alphabet[(alphabet.index(ch) + key) % 26])
                break
        else:
            out.append(ch)
    return "".join(out)


def unshift(text, key):
    return shift(text, -key)


def rot13(text):
    return shift(text, 13)


def crack(ciphertext, word):
    for key in range(26):
        if word in unshift(ciphertext, key):
            return key
    raise ValueError("no key reveals the word")
