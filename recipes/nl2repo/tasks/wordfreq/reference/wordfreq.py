"""Word frequency counting."""

import re
from collections import Counter

_WORD = re.compile(r"[A-Za-z0-9']+")


def words(text):
    return [w.lower() for w in _WORD.findall(text)]


def counts(text, stopwords=()):
    skip = {w.lower() for w in stopwords}
    return dict(Counter(w for w in words(text) if w not in skip))


def top(text, k, stopwords=()):
    if k < 0:
        raise ValueError("k must be >= 0")
    ranked = sorted(counts(text, stopwords).items(), key=lambda item: (-item[1], item[0]))
    return ranked[:k]
