import pytest

from wordfreq import counts, top, words


def test_words():
    assert words("Don't stop, believing!") == ["don't", "stop", "believing"]


def test_counts():
    assert counts("a b a") == {"a": 2, "b": 1}


def test_top_ties_alphabetical():
    assert top("b a c a b", 2) == [("a", 2), ("b", 2)]


def test_top_k_larger_than_vocab():
    assert top("x", 5) == [("x", 1)]


def test_stopwords():
    assert counts("The cat and the hat", stopwords=["the", "AND"]) == {"cat": 1, "hat": 1}
    assert top("the the dog", 1, stopwords={"the"}) == [("dog", 1)]


def test_negative_k():
    with pytest.raises(ValueError):
        top("a", -1)
