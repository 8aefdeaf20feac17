"""Bit manipulation helpers for non-negative integers."""


def _check(n):
    if n < 0:
        raise ValueError("negative numbers are not supported")


def popcount(n):
    _check(n)
    return bin(n).count("1")


def parity(n):
    return popcount(n) % 2


def reverse(n, width):
    _check(n)
    if n >= 1 << width:
        raise ValueError("n does not fit in width bits")
    out = 0
    for _ in range(width):
        out = (out << 1) | (n & 1)
        n >>= 1
    return out


def bit_string(n, width=0):
    _check(n)
    return format(n, "b").zfill(width)


def is_power_of_two(n):
    _check(n)
    return n > 0 and n & (n - 1) == 0
