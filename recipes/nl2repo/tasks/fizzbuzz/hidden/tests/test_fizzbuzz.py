import pytest

from fizzbuzz import count_words, fizzbuzz


def test_classic():
    assert fizzbuzz(15)[-1] == "FizzBuzz"
    assert fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]


def test_nothing():
    assert fizzbuzz(0) == []


def test_custom_rules():
    assert fizzbuzz(7, rules=((7, "Bazz"),))[-1] == "Bazz"
    assert fizzbuzz(6, rules=((2, "A"), (3, "B")))[-1] == "AB"


def test_bad_rule():
    with pytest.raises(ValueError):
        fizzbuzz(3, rules=((0, "X"),))


def test_count_words():
    assert count_words(15) == {"Fizz": 4, "Buzz": 2, "FizzBuzz": 1}
