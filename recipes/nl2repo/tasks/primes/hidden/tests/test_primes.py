import pytest

from primes import factorize, is_prime, next_prime, primes_up_to


def test_is_prime():
    assert [n for n in range(-3, 20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]


def test_sieve():
    assert primes_up_to(30) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert primes_up_to(1) == []


def test_factorize():
    assert factorize(12) == [2, 2, 3]
    assert factorize(97) == [97]
    assert factorize(2 * 3 * 3 * 101) == [2, 3, 3, 101]


def test_factorize_invalid():
    with pytest.raises(ValueError):
        factorize(1)


def test_next_prime():
    assert next_prime(13) == 17
    assert next_prime(-5) == 2
