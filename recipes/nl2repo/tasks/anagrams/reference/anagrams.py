"""Anagram utilities."""


def signature(word):
    return "".join(sorted(ch.lower() for ch in word if ch.isalnum()))


def is_anagram(a, b):
    sa, sb = signature(a), signature(b)
    return bool(sa) and sa == sb


def group(words):
    groups = {}
    for word in words:
        groups.setdefault(signature(word), []).append(word)
    return list(groups.values())
