"""Text statistics."""

import math
import re

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


def sentences(text):
    return [piece.strip() for piece in re.split(r"[.!?]+", text) if piece.strip()]


def _words(text):
    return _WORD.findall(text)


def word_count(text):
    return len(_words(text))


def average_word_length(text):
    words = _words(text)
    if not words:
        return 0.0
    return round(sum(len(w.replace("'", "")) for w in words) / len(words), 2)


def reading_time(text, wpm=200):
    count = word_count(text)
    return math.ceil(count / wpm) if count else 0
