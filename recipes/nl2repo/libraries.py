"""The libraries of the built-in NL2Repo mini suite (read by make_tasks.py).

Each entry is a small pure-stdlib Python library: the specification the agent gets (``start.md``), a
reference implementation (``reference/``, hidden) and a hidden pytest suite of 5-30 tests. The spec is
the only thing the agent sees, so it states every name, signature, return value and error the tests
check.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Library:
    name: str
    title: str
    spec: str
    files: dict[str, str]
    tests: str


LIBRARIES: list[Library] = []


def lib(name: str, title: str, spec: str, files: dict[str, str], tests: str) -> None:
    LIBRARIES.append(Library(name, title, spec.strip() + "\n", files, tests))


lib(
    "rle",
    "run-length encoding",
    """
Implement a module `rle` (file `rle.py` at the repository root).

- `encode(text: str) -> str`: run-length encode `text` as count followed by character, for every run,
  e.g. `encode("aaabcc") == "3a1b2c"`. `encode("") == ""`.
- `decode(data: str) -> str`: the inverse. Counts may have several digits (`decode("12a") == "a" * 12`).
  Raise `ValueError` when `data` is malformed (a character without a count before it, or a count at
  the end without a character).
- Characters are never digits in the input of `encode`; raise `ValueError` if `encode` gets a digit.
""",
    {
        "rle.py": '''"""Run-length encoding."""


def encode(text):
    if any(ch.isdigit() for ch in text):
        raise ValueError("digits cannot be run-length encoded")
    out, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        out.append(f"{j - i}{text[i]}")
        i = j
    return "".join(out)


def decode(data):
    out, count = [], ""
    for ch in data:
        if ch.isdigit():
            count += ch
        elif not count:
            raise ValueError(f"character {ch!r} without a count")
        else:
            out.append(ch * int(count))
            count = ""
    if count:
        raise ValueError("count without a character at the end")
    return "".join(out)
''',
    },
    '''import pytest

from rle import decode, encode


def test_encode_runs():
    assert encode("aaabcc") == "3a1b2c"


def test_encode_empty():
    assert encode("") == ""


def test_decode_runs():
    assert decode("3a1b2c") == "aaabcc"


def test_decode_multi_digit():
    assert decode("12a") == "a" * 12


def test_round_trip():
    text = "wwwwaaadexxxxxx"
    assert decode(encode(text)) == text


def test_decode_missing_count():
    with pytest.raises(ValueError):
        decode("a3b")


def test_decode_trailing_count():
    with pytest.raises(ValueError):
        decode("3a4")


def test_encode_rejects_digits():
    with pytest.raises(ValueError):
        encode("a1")
''',
)

lib(
    "caesar",
    "Caesar and ROT13 ciphers",
    """
Implement a module `caesar` (file `caesar.py`).

- `shift(text: str, key: int) -> str`: shift every ASCII letter `key` places in the alphabet, wrapping
  around and keeping case; other characters are unchanged. `key` may be negative or larger than 26.
- `unshift(text: str, key: int) -> str`: the inverse of `shift`.
- `rot13(text: str) -> str`: `shift(text, 13)`.
- `crack(ciphertext: str, word: str) -> int`: the smallest key in `0..25` such that `unshift(ciphertext,
  key)` contains `word` (case-sensitive); raise `ValueError` if there is none.
""",
    {
        "caesar.py": '''"""Caesar and ROT13 ciphers."""

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
''',
    },
    '''import pytest

from caesar import crack, rot13, shift, unshift


def test_shift_wraps():
    assert shift("xyz", 3) == "abc"


def test_shift_keeps_case_and_symbols():
    assert shift("Hello, World!", 1) == "Ifmmp, Xpsme!"


def test_negative_and_large_keys():
    assert shift("abc", -1) == "zab"
    assert shift("abc", 27) == "bcd"


def test_unshift_inverts():
    assert unshift(shift("Secret msg", 11), 11) == "Secret msg"


def test_rot13_twice():
    assert rot13("Gyre") == "Tler"
    assert rot13(rot13("Gyre")) == "Gyre"


def test_crack():
    assert crack(shift("attack at dawn", 7), "dawn") == 7


def test_crack_fails():
    with pytest.raises(ValueError):
        crack("zzz", "hello")
''',
)

lib(
    "temperature",
    "temperature conversion",
    """
Implement a module `temperature` (file `temperature.py`).

- `convert(value: float, source: str, target: str) -> float` between the scales `"C"`, `"F"` and `"K"`
  (case-insensitive), rounded to 2 decimals. Raise `ValueError` for an unknown scale, and for a
  temperature below absolute zero (0 K) in the source scale.
- `parse(text: str) -> tuple[float, str]`: parse strings such as `"21.5C"`, `"-40 F"`, `"300k"` into
  `(value, scale)` with the scale upper-cased; raise `ValueError` otherwise.
""",
    {
        "temperature.py": '''"""Temperature conversion."""

import re

_TO_K = {"C": lambda v: v + 273.15, "F": lambda v: (v - 32) * 5 / 9 + 273.15, "K": lambda v: v}
_FROM_K = {"C": lambda k: k - 273.15, "F": lambda k: (k - 273.15) * 9 / 5 + 32, "K": lambda k: k}


def _scale(name):
    scale = name.upper()
    if scale not in _TO_K:
        raise ValueError(f"unknown scale {name!r}")
    return scale


def convert(value, source, target):
    kelvin = _TO_K[_scale(source)](value)
    if kelvin < 0:
        raise ValueError("below absolute zero")
    return round(_FROM_K[_scale(target)](kelvin), 2)


def parse(text):
    match = re.fullmatch(r"\\s*(-?\\d+(?:\\.\\d+)?)\\s*([cfkCFK])\\s*", text)
    if not match:
        raise ValueError(f"not a temperature: {text!r}")
    return float(match.group(1)), match.group(2).upper()
''',
    },
    '''import pytest

from temperature import convert, parse


def test_c_to_f():
    assert convert(100, "C", "F") == 212


def test_f_to_c():
    assert convert(-40, "F", "C") == -40


def test_k_to_c():
    assert convert(0, "K", "C") == -273.15


def test_case_insensitive():
    assert convert(0, "c", "k") == 273.15


def test_unknown_scale():
    with pytest.raises(ValueError):
        convert(1, "X", "C")


def test_below_absolute_zero():
    with pytest.raises(ValueError):
        convert(-300, "C", "F")


def test_parse():
    assert parse("21.5C") == (21.5, "C")
    assert parse("-40 F") == (-40.0, "F")
    assert parse("300k") == (300.0, "K")


def test_parse_bad():
    with pytest.raises(ValueError):
        parse("hot")
''',
)

lib(
    "rpn",
    "a reverse Polish notation calculator",
    """
Implement a module `rpn` (file `rpn.py`).

- `evaluate(expression: str) -> float`: evaluate a reverse Polish expression of numbers (integers or
  decimals, possibly negative like `-3`) and the operators `+ - * /` separated by whitespace, e.g.
  `evaluate("3 4 + 2 *") == 14`. The result is a float.
- Raise `ValueError` for an unknown token, too few operands for an operator, or when more than one
  value is left at the end (or none).
- Raise `ZeroDivisionError` when dividing by zero.
""",
    {
        "rpn.py": '''"""A reverse Polish notation calculator."""

import operator

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def evaluate(expression):
    stack = []
    for token in expression.split():
        if token in OPS:
            if len(stack) < 2:
                raise ValueError(f"not enough operands for {token!r}")
            right, left = stack.pop(), stack.pop()
            stack.append(OPS[token](left, right))
            continue
        try:
            stack.append(float(token))
        except ValueError:
            raise ValueError(f"unknown token {token!r}") from None
    if len(stack) != 1:
        raise ValueError("expression must leave exactly one value")
    return float(stack[0])
''',
    },
    '''import pytest

from rpn import evaluate


def test_simple():
    assert evaluate("3 4 +") == 7


def test_nested():
    assert evaluate("3 4 + 2 *") == 14


def test_order_of_operands():
    assert evaluate("10 2 -") == 8
    assert evaluate("10 4 /") == 2.5


def test_negative_and_decimal():
    assert evaluate("-3 1.5 *") == -4.5


def test_result_is_float():
    assert isinstance(evaluate("2 2 +"), float)


def test_unknown_token():
    with pytest.raises(ValueError):
        evaluate("1 2 ^")


def test_missing_operand():
    with pytest.raises(ValueError):
        evaluate("1 +")


def test_leftover_values():
    with pytest.raises(ValueError):
        evaluate("1 2")
    with pytest.raises(ValueError):
        evaluate("")


def test_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        evaluate("1 0 /")
''',
)

lib(
    "matrix",
    "small matrix algebra",
    """
Implement a module `matrix` (file `matrix.py`) on matrices given as lists of rows (lists of numbers).

- `shape(m) -> tuple[int, int]`: (rows, columns). Raise `ValueError` if the rows have different lengths
  or the matrix is empty.
- `identity(n) -> list[list[int]]`.
- `transpose(m)`.
- `add(a, b)`: element-wise sum; `ValueError` if the shapes differ.
- `multiply(a, b)`: the matrix product; `ValueError` if the columns of `a` differ from the rows of `b`.
- `determinant(m)`: for square matrices of any size (`ValueError` otherwise); integers in give integers
  out for 1x1, 2x2 and 3x3 (use exact arithmetic, e.g. cofactor expansion).
""",
    {
        "matrix.py": '''"""Small matrix algebra on lists of rows."""


def shape(m):
    if not m or not m[0]:
        raise ValueError("empty matrix")
    width = len(m[0])
    if any(len(row) != width for row in m):
        raise ValueError("ragged matrix")
    return len(m), width


def identity(n):
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def transpose(m):
    rows, cols = shape(m)
    return [[m[r][c] for r in range(rows)] for c in range(cols)]


def add(a, b):
    if shape(a) != shape(b):
        raise ValueError("shapes differ")
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def multiply(a, b):
    (ar, ac), (br, bc) = shape(a), shape(b)
    if ac != br:
        raise ValueError("inner dimensions differ")
    return [[sum(a[i][k] * b[k][j] for k in range(ac)) for j in range(bc)] for i in range(ar)]


def determinant(m):
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("determinant needs a square matrix")
    if rows == 1:
        return m[0][0]
    total = 0
    for j in range(cols):
        minor = [row[:j] + row[j + 1 :] for row in m[1:]]
        total += (-1) ** j * m[0][j] * determinant(minor)
    return total
''',
    },
    '''import pytest

from matrix import add, determinant, identity, multiply, shape, transpose


def test_shape():
    assert shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)


def test_ragged():
    with pytest.raises(ValueError):
        shape([[1, 2], [3]])


def test_identity():
    assert identity(2) == [[1, 0], [0, 1]]


def test_transpose():
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]


def test_add():
    assert add([[1, 2]], [[3, 4]]) == [[4, 6]]
    with pytest.raises(ValueError):
        add([[1]], [[1, 2]])


def test_multiply():
    assert multiply([[1, 2], [3, 4]], [[5], [6]]) == [[17], [39]]
    with pytest.raises(ValueError):
        multiply([[1, 2]], [[1, 2]])


def test_multiply_identity():
    m = [[2, 3], [4, 5]]
    assert multiply(m, identity(2)) == m


def test_determinant():
    assert determinant([[7]]) == 7
    assert determinant([[1, 2], [3, 4]]) == -2
    assert determinant([[2, 0, 1], [1, 3, 2], [1, 1, 2]]) == 6


def test_determinant_square_only():
    with pytest.raises(ValueError):
        determinant([[1, 2]])
''',
)

lib(
    "bits",
    "bit manipulation helpers",
    """
Implement a module `bits` (file `bits.py`) for non-negative integers (raise `ValueError` for negative
input in every function).

- `popcount(n) -> int`: number of set bits.
- `parity(n) -> int`: 1 if the number of set bits is odd, else 0.
- `reverse(n, width) -> int`: the lowest `width` bits of `n` in reverse order (`reverse(0b0011, 4) ==
  0b1100`); raise `ValueError` if `n` does not fit in `width` bits.
- `bit_string(n, width=0) -> str`: binary digits without prefix, left-padded with zeros to `width`.
- `is_power_of_two(n) -> bool` (False for 0).
""",
    {
        "bits.py": '''"""Bit manipulation helpers for non-negative integers."""


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
''',
    },
    '''import pytest

from bits import bit_string, is_power_of_two, parity, popcount, reverse


def test_popcount():
    assert popcount(0) == 0
    assert popcount(0b1011) == 3


def test_parity():
    assert parity(0b111) == 1
    assert parity(0b11) == 0


def test_reverse():
    assert reverse(0b0011, 4) == 0b1100
    assert reverse(1, 8) == 128


def test_reverse_too_wide():
    with pytest.raises(ValueError):
        reverse(16, 4)


def test_bit_string():
    assert bit_string(5) == "101"
    assert bit_string(5, 8) == "00000101"


def test_power_of_two():
    assert is_power_of_two(64)
    assert not is_power_of_two(0)
    assert not is_power_of_two(12)


def test_negative():
    for fn in (popcount, parity, is_power_of_two, bit_string):
        with pytest.raises(ValueError):
            fn(-1)
''',
)

lib(
    "wordfreq",
    "word frequency counting",
    """
Implement a module `wordfreq` (file `wordfreq.py`).

- `words(text: str) -> list[str]`: the words of `text`, lower-cased, where a word is a maximal run of
  letters, digits or apostrophes (`"Don't stop"` gives `["don't", "stop"]`).
- `counts(text: str) -> dict[str, int]`.
- `top(text: str, k: int) -> list[tuple[str, int]]`: the `k` most frequent words with their counts,
  most frequent first, ties broken alphabetically. Raise `ValueError` if `k` is negative.
- `stopwords` parameter: `counts` and `top` take an optional keyword `stopwords` (an iterable of words,
  compared lower-cased) to ignore.
""",
    {
        "wordfreq.py": '''"""Word frequency counting."""

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
''',
    },
    '''import pytest

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
''',
)

lib(
    "semver",
    "semantic version handling",
    """
Implement a module `semver` (file `semver.py`).

- `parse(text) -> tuple[int, int, int, str]`: `"1.2.3"` gives `(1, 2, 3, "")`, `"1.2.3-rc.1"` gives
  `(1, 2, 3, "rc.1")`. Raise `ValueError` for anything else (missing parts, leading `v`, negative or
  non-numeric parts).
- `compare(a: str, b: str) -> int`: -1, 0 or 1. Versions compare by major, minor, patch; a version with
  a pre-release suffix is lower than the same version without one; two pre-releases compare as
  strings.
- `bump(version: str, part: str) -> str`: `part` is `"major"`, `"minor"` or `"patch"`; lower parts reset
  to 0 and any pre-release suffix is dropped. `ValueError` for another `part`.
""",
    {
        "semver.py": '''"""Semantic versions."""

import re

_VERSION = re.compile(r"(\\d+)\\.(\\d+)\\.(\\d+)(?:-([0-9A-Za-z.]+))?")


def parse(text):
    match = _VERSION.fullmatch(text)
    if not match:
        raise ValueError(f"not a semantic version: {text!r}")
    major, minor, patch, pre = match.groups()
    return int(major), int(minor), int(patch), pre or ""


def _key(version):
    major, minor, patch, pre = parse(version)
    return (major, minor, patch, 0 if pre else 1, pre)


def compare(a, b):
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def bump(version, part):
    major, minor, patch, _ = parse(version)
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    if part == "patch":
        return f"{major}.{minor}.{patch + 1}"
    raise ValueError(f"unknown part {part!r}")
''',
    },
    '''import pytest

from semver import bump, compare, parse


def test_parse():
    assert parse("1.2.3") == (1, 2, 3, "")
    assert parse("1.2.3-rc.1") == (1, 2, 3, "rc.1")


@pytest.mark.parametrize("bad", ["1.2", "v1.2.3", "1.-2.3", "a.b.c"])
def test_parse_bad(bad):
    with pytest.raises(ValueError):
        parse(bad)


def test_compare_numeric_not_lexical():
    assert compare("1.10.0", "1.9.0") == 1


def test_compare_equal():
    assert compare("2.0.0", "2.0.0") == 0


def test_prerelease_is_lower():
    assert compare("1.0.0-alpha", "1.0.0") == -1
    assert compare("1.0.0-alpha", "1.0.0-beta") == -1


def test_bump():
    assert bump("1.2.3", "major") == "2.0.0"
    assert bump("1.2.3", "minor") == "1.3.0"
    assert bump("1.2.3-rc.1", "patch") == "1.2.4"


def test_bump_bad_part():
    with pytest.raises(ValueError):
        bump("1.2.3", "build")
''',
)

lib(
    "queues",
    "a queue built from two stacks",
    """
Implement a module `queues` (file `queues.py`) with a class `Queue`:

- `Queue(items=())`: a FIFO queue, optionally filled from an iterable (first item at the front).
- `push(item)`, `pop()` (remove and return the front item), `peek()` (front item, not removed); `pop`
  and `peek` raise `IndexError` on an empty queue.
- `len(queue)`, `bool(queue)` (False when empty) and iteration from front to back (not consuming).
- Amortised O(1) operations: store items in two Python lists used as stacks.
""",
    {
        "queues.py": '''"""A FIFO queue built from two stacks."""


class Queue:
    def __init__(self, items=()):
        self._in = []
        self._out = []
        for item in items:
            self.push(item)

    def push(self, item):
        self._in.append(item)

    def _shift(self):
        if not self._out:
            while self._in:
                self._out.append(self._in.pop())

    def pop(self):
        self._shift()
        if not self._out:
            raise IndexError("pop from empty queue")
        return self._out.pop()

    def peek(self):
        self._shift()
        if not self._out:
            raise IndexError("peek at empty queue")
        return self._out[-1]

    def __len__(self):
        return len(self._in) + len(self._out)

    def __bool__(self):
        return len(self) > 0

    def __iter__(self):
        yield from reversed(self._out)
        yield from self._in
''',
    },
    '''import pytest

from queues import Queue


def test_fifo():
    q = Queue()
    for i in range(3):
        q.push(i)
    assert [q.pop(), q.pop(), q.pop()] == [0, 1, 2]


def test_initial_items():
    assert Queue("ab").pop() == "a"


def test_peek():
    q = Queue([1, 2])
    assert q.peek() == 1
    assert len(q) == 2


def test_empty_errors():
    with pytest.raises(IndexError):
        Queue().pop()
    with pytest.raises(IndexError):
        Queue().peek()


def test_bool():
    assert not Queue()
    assert Queue([0])


def test_interleaved_iteration():
    q = Queue([1, 2])
    q.pop()
    q.push(3)
    q.push(4)
    assert list(q) == [2, 3, 4]
    assert len(q) == 3
''',
)

lib(
    "primes",
    "prime numbers",
    """
Implement a module `primes` (file `primes.py`).

- `is_prime(n: int) -> bool` (False for numbers below 2).
- `primes_up_to(limit: int) -> list[int]`: all primes `<= limit`, ascending (use a sieve).
- `factorize(n: int) -> list[int]`: prime factors of `n >= 2` in ascending order with repetition
  (`factorize(12) == [2, 2, 3]`); raise `ValueError` for `n < 2`.
- `next_prime(n: int) -> int`: the smallest prime strictly greater than `n`.
""",
    {
        "primes.py": '''"""Prime numbers."""


def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def primes_up_to(limit):
    if limit < 2:
        return []
    sieve = [True] * (limit + 1)
    sieve[0] = sieve[1] = False
    for i in range(2, int(limit**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = [False] * len(sieve[i * i :: i])
    return [i for i, flag in enumerate(sieve) if flag]


def factorize(n):
    if n < 2:
        raise ValueError("n must be >= 2")
    factors, d = [], 2
    while d * d <= n:
        while n % d == 0:
            factors.append(d)
            n //= d
        d += 1
    if n > 1:
        factors.append(n)
    return factors


def next_prime(n):
    candidate = max(n + 1, 2)
    while not is_prime(candidate):
        candidate += 1
    return candidate
''',
    },
    '''import pytest

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
''',
)

lib(
    "baseconv",
    "number base conversion",
    """
Implement a module `baseconv` (file `baseconv.py`).

- `to_base(n: int, base: int) -> str`: the representation of `n` in `base` (2..36) with digits
  `0-9a-z`; negative numbers get a leading `-`; `to_base(0, b) == "0"`.
- `from_base(text: str, base: int) -> int`: the inverse, accepting upper- or lower-case digits and a
  leading `-`. Raise `ValueError` for an empty string or a digit not valid in `base`.
- Both raise `ValueError` if `base` is outside 2..36.
""",
    {
        "baseconv.py": '''"""Number base conversion."""

DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _check(base):
    if not 2 <= base <= 36:
        raise ValueError("base must be in 2..36")


def to_base(n, base):
    _check(base)
    if n == 0:
        return "0"
    sign, n = ("-", -n) if n < 0 else ("", n)
    out = []
    while n:
        n, r = divmod(n, base)
        out.append(DIGITS[r])
    return sign + "".join(reversed(out))


def from_base(text, base):
    _check(base)
    body = text[1:] if text.startswith("-") else text
    if not body:
        raise ValueError("empty number")
    value = 0
    for ch in body.lower():
        digit = DIGITS.find(ch)
        if digit < 0 or digit >= base:
            raise ValueError(f"invalid digit {ch!r} for base {base}")
        value = value * base + digit
    return -value if text.startswith("-") else value
''',
    },
    '''import pytest

from baseconv import from_base, to_base


def test_binary():
    assert to_base(10, 2) == "1010"


def test_hex_and_36():
    assert to_base(255, 16) == "ff"
    assert to_base(35, 36) == "z"


def test_zero_and_negative():
    assert to_base(0, 7) == "0"
    assert to_base(-10, 2) == "-1010"


def test_from_base():
    assert from_base("FF", 16) == 255
    assert from_base("-1010", 2) == -10


def test_round_trip():
    for n in (1, 42, 12345, -999):
        for base in (2, 8, 10, 36):
            assert from_base(to_base(n, base), base) == n


def test_invalid_digit():
    with pytest.raises(ValueError):
        from_base("12", 2)
    with pytest.raises(ValueError):
        from_base("", 10)


def test_invalid_base():
    with pytest.raises(ValueError):
        to_base(1, 1)
    with pytest.raises(ValueError):
        from_base("1", 37)
''',
)

lib(
    "anagrams",
    "anagram utilities",
    """
Implement a module `anagrams` (file `anagrams.py`). Comparisons ignore case, spaces and punctuation
(only letters and digits count).

- `signature(word: str) -> str`: the counted letters/digits of `word`, lower-cased and sorted
  (`signature("Dormitory") == "dimoorrty"`).
- `is_anagram(a: str, b: str) -> bool`: same signature, and both non-empty after cleaning.
- `group(words: list[str]) -> list[list[str]]`: group words that are anagrams of each other; each group
  keeps the input order of its words, and groups are ordered by their first word's position.
""",
    {
        "anagrams.py": '''"""Anagram utilities."""


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
''',
    },
    '''from anagrams import group, is_anagram, signature


def test_signature():
    assert signature("Dormitory") == "dimoorrty"


def test_is_anagram_ignores_case_and_spaces():
    assert is_anagram("Dormitory", "Dirty room!")


def test_not_anagram():
    assert not is_anagram("abc", "abd")


def test_empty_is_not_anagram():
    assert not is_anagram("", "!!")


def test_group():
    assert group(["listen", "google", "silent", "enlist", "gogole", "x"]) == [
        ["listen", "silent", "enlist"],
        ["google", "gogole"],
        ["x"],
    ]
''',
)

lib(
    "palindromes",
    "palindromes",
    """
Implement a module `palindromes` (file `palindromes.py`).

- `is_palindrome(text: str) -> bool`: ignoring case and every non-alphanumeric character
  (`"A man, a plan, a canal: Panama"` is one). The empty string is a palindrome.
- `longest(text: str) -> str`: the longest palindromic substring of `text` compared exactly (case and
  punctuation count); the leftmost one on ties; `""` for `""`.
- `make_palindrome(text: str) -> str`: the shortest palindrome (exact comparison) that starts with
  `text`, made by appending characters (`make_palindrome("abc") == "abcba"`).
""",
    {
        "palindromes.py": '''"""Palindromes."""


def is_palindrome(text):
    clean = [ch.lower() for ch in text if ch.isalnum()]
    return clean == clean[::-1]


def longest(text):
    best = ""
    for center in range(2 * len(text) - 1):
        left, right = center // 2, center // 2 + center % 2
        while left >= 0 and right < len(text) and text[left] == text[right]:
            left -= 1
            right += 1
        candidate = text[left + 1 : right]
        if len(candidate) > len(best):
            best = candidate
    return best


def make_palindrome(text):
    for i in range(len(text) + 1):
        suffix = text[i:]
        if suffix == suffix[::-1]:
            return text + text[:i][::-1]
    return text
''',
    },
    '''from palindromes import is_palindrome, longest, make_palindrome


def test_sentence_palindrome():
    assert is_palindrome("A man, a plan, a canal: Panama")


def test_not_palindrome():
    assert not is_palindrome("hello")


def test_empty():
    assert is_palindrome("")
    assert longest("") == ""


def test_longest():
    assert longest("babad") == "bab"
    assert longest("cbbd") == "bb"
    assert longest("xabacdcabay") == "abacdcaba"


def test_make_palindrome():
    assert make_palindrome("abc") == "abcba"
    assert make_palindrome("abb") == "abba"
    assert make_palindrome("aba") == "aba"
''',
)

lib(
    "fizzbuzz",
    "configurable FizzBuzz",
    """
Implement a module `fizzbuzz` (file `fizzbuzz.py`).

- `fizzbuzz(n: int, rules=((3, "Fizz"), (5, "Buzz"))) -> list[str]`: for 1..n, the concatenation of
  the words of every rule whose divisor divides the number (in rule order), or the number itself as a
  string. `n <= 0` gives `[]`.
- Raise `ValueError` if a rule has a divisor `<= 0`.
- `count_words(n, rules=...) -> dict[str, int]`: how many times each output that is not a number
  appears in `fizzbuzz(n, rules)`.
""",
    {
        "fizzbuzz.py": '''"""Configurable FizzBuzz."""

DEFAULT_RULES = ((3, "Fizz"), (5, "Buzz"))


def fizzbuzz(n, rules=DEFAULT_RULES):
    if any(divisor <= 0 for divisor, _ in rules):
        raise ValueError("divisors must be positive")
    out = []
    for i in range(1, n + 1):
        word = "".join(text for divisor, text in rules if i % divisor == 0)
        out.append(word or str(i))
    return out


def count_words(n, rules=DEFAULT_RULES):
    counts = {}
    for item in fizzbuzz(n, rules):
        if not item.isdigit():
            counts[item] = counts.get(item, 0) + 1
    return counts
''',
    },
    '''import pytest

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
''',
)

lib(
    "bank",
    "a bank account model",
    """
Implement a module `bank` (file `bank.py`).

- `class InsufficientFunds(Exception)`.
- `class Account(owner: str, balance: int = 0)`: amounts are integer cents. `balance` attribute.
  Raise `ValueError` for a negative opening balance.
- `deposit(amount)`, `withdraw(amount)`: `ValueError` for amounts `<= 0`; `withdraw` raises
  `InsufficientFunds` (leaving the balance unchanged) when it would go below zero. Both return the new
  balance.
- `transfer(source, target, amount)` (module function): withdraw from `source` and deposit into
  `target`; on failure neither account changes.
- `history` attribute: a list of `(kind, amount)` tuples in order, with kind `"deposit"` or
  `"withdraw"` (a transfer records one of each on the two accounts).
""",
    {
        "bank.py": '''"""A bank account model (amounts in cents)."""


class InsufficientFunds(Exception):
    pass


class Account:
    def __init__(self, owner, balance=0):
        if balance < 0:
            raise ValueError("opening balance must be >= 0")
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.balance += amount
        self.history.append(("deposit", amount))
        return self.balance

    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        if amount > self.balance:
            raise InsufficientFunds(f"{self.owner} has {self.balance}, needs {amount}")
        self.balance -= amount
        self.history.append(("withdraw", amount))
        return self.balance


def transfer(source, target, amount):
    source.withdraw(amount)
    target.deposit(amount)
''',
    },
    '''import pytest

from bank import Account, InsufficientFunds, transfer


def test_deposit_withdraw():
    account = Account("ann", 100)
    assert account.deposit(50) == 150
    assert account.withdraw(30) == 120


def test_negative_opening():
    with pytest.raises(ValueError):
        Account("x", -1)


def test_bad_amounts():
    account = Account("bob")
    with pytest.raises(ValueError):
        account.deposit(0)
    with pytest.raises(ValueError):
        account.withdraw(-5)


def test_overdraw():
    account = Account("cy", 10)
    with pytest.raises(InsufficientFunds):
        account.withdraw(11)
    assert account.balance == 10


def test_transfer():
    a, b = Account("a", 100), Account("b")
    transfer(a, b, 40)
    assert (a.balance, b.balance) == (60, 40)


def test_failed_transfer_changes_nothing():
    a, b = Account("a", 10), Account("b", 5)
    with pytest.raises(InsufficientFunds):
        transfer(a, b, 50)
    assert (a.balance, b.balance) == (10, 5)


def test_history():
    a, b = Account("a", 10), Account("b")
    a.deposit(5)
    transfer(a, b, 3)
    assert a.history == [("deposit", 5), ("withdraw", 3)]
    assert b.history == [("deposit", 3)]
''',
)

lib(
    "inventory",
    "a stock inventory",
    """
Implement a module `inventory` (file `inventory.py`) with a class `Inventory`:

- `add(name: str, quantity: int, unit_price: float)`: add stock; adding an existing item increases its
  quantity and replaces its unit price. `ValueError` for quantity `<= 0` or a negative price.
- `remove(name, quantity)`: `KeyError` for an unknown item, `ValueError` when removing more than is in
  stock or a quantity `<= 0`; an item whose quantity reaches 0 disappears.
- `quantity(name) -> int` (0 for unknown items), `total_value() -> float` (sum of quantity x price,
  rounded to 2 decimals), `names() -> list[str]` (sorted), `low_stock(threshold) -> list[str]` (sorted
  names with quantity `< threshold`).
""",
    {
        "inventory.py": '''"""A stock inventory."""


class Inventory:
    def __init__(self):
        self._items = {}

    def add(self, name, quantity, unit_price):
        if quantity <= 0 or unit_price < 0:
            raise ValueError("quantity must be positive and price >= 0")
        current = self._items.get(name, (0, unit_price))[0]
        self._items[name] = (current + quantity, unit_price)

    def remove(self, name, quantity):
        if name not in self._items:
            raise KeyError(name)
        current, price = self._items[name]
        if quantity <= 0 or quantity > current:
            raise ValueError("bad quantity")
        if quantity == current:
            del self._items[name]
        else:
            self._items[name] = (current - quantity, price)

    def quantity(self, name):
        return self._items.get(name, (0, 0))[0]

    def total_value(self):
        return round(sum(q * p for q, p in self._items.values()), 2)

    def names(self):
        return sorted(self._items)

    def low_stock(self, threshold):
        return sorted(name for name, (q, _) in self._items.items() if q < threshold)
''',
    },
    '''import pytest

from inventory import Inventory


@pytest.fixture
def inv():
    stock = Inventory()
    stock.add("apple", 10, 0.5)
    stock.add("pear", 2, 1.25)
    return stock


def test_quantity(inv):
    assert inv.quantity("apple") == 10
    assert inv.quantity("kiwi") == 0


def test_add_existing_updates_price(inv):
    inv.add("apple", 5, 0.6)
    assert inv.quantity("apple") == 15
    assert inv.total_value() == 11.5


def test_total_value(inv):
    assert inv.total_value() == 7.5


def test_remove(inv):
    inv.remove("apple", 4)
    assert inv.quantity("apple") == 6
    inv.remove("pear", 2)
    assert inv.names() == ["apple"]


def test_remove_errors(inv):
    with pytest.raises(KeyError):
        inv.remove("kiwi", 1)
    with pytest.raises(ValueError):
        inv.remove("pear", 3)


def test_add_errors(inv):
    with pytest.raises(ValueError):
        inv.add("x", 0, 1)
    with pytest.raises(ValueError):
        inv.add("x", 1, -1)


def test_low_stock(inv):
    assert inv.low_stock(5) == ["pear"]
''',
)

lib(
    "durations",
    "human-readable durations",
    """
Implement a module `durations` (file `durations.py`).

- `parse(text: str) -> int`: seconds in a duration such as `"1h30m"`, `"2d"`, `"45s"`, `"1h 5m 10s"`,
  with units `d`, `h`, `m`, `s` (case-insensitive), each at most once and in that order; whitespace
  between parts is allowed. A bare integer means seconds. Raise `ValueError` otherwise (empty string,
  unknown unit, repeated or out-of-order units).
- `format(seconds: int) -> str`: the inverse canonical form, largest units first, zero parts left
  out, no spaces (`format(5400) == "1h30m"`; `format(0) == "0s"`). Raise `ValueError` for negative
  input.
""",
    {
        "durations.py": '''"""Human-readable durations."""

import re

UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_PART = re.compile(r"(\\d+)\\s*([a-zA-Z])")


def parse(text):
    text = text.strip()
    if text.isdigit():
        return int(text)
    if not text:
        raise ValueError("empty duration")
    position, total, last = 0, 0, -1
    order = [u for u, _ in UNITS]
    for match in _PART.finditer(text):
        if text[position : match.start()].strip():
            raise ValueError(f"bad duration {text!r}")
        unit = match.group(2).lower()
        if unit not in order or order.index(unit) <= last:
            raise ValueError(f"bad unit order in {text!r}")
        last = order.index(unit)
        total += int(match.group(1)) * dict(UNITS)[unit]
        position = match.end()
    if position == 0 or text[position:].strip():
        raise ValueError(f"bad duration {text!r}")
    return total


def format(seconds):  # noqa: A001 - the public name the spec asks for
    if seconds < 0:
        raise ValueError("negative duration")
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
''',
    },
    '''import pytest

import durations


def test_parse_combined():
    assert durations.parse("1h30m") == 5400


def test_parse_spaces_and_case():
    assert durations.parse("1H 5m 10S") == 3910


def test_parse_days_and_bare_seconds():
    assert durations.parse("2d") == 172800
    assert durations.parse("42") == 42


@pytest.mark.parametrize("bad", ["", "5x", "1m1h", "1h1h", "h", "3h xx"])
def test_parse_bad(bad):
    with pytest.raises(ValueError):
        durations.parse(bad)


def test_format():
    assert durations.format(5400) == "1h30m"
    assert durations.format(90061) == "1d1h1m1s"
    assert durations.format(0) == "0s"


def test_format_negative():
    with pytest.raises(ValueError):
        durations.format(-1)


def test_round_trip():
    for value in (1, 59, 3600, 86399, 200000):
        assert durations.parse(durations.format(value)) == value
''',
)

lib(
    "checksums",
    "check digit algorithms",
    """
Implement a module `checksums` (file `checksums.py`). Inputs are strings; spaces and hyphens in them
are ignored.

- `luhn_valid(number: str) -> bool`: the Luhn check (credit cards); False for strings with other
  non-digit characters or fewer than 2 digits.
- `luhn_digit(partial: str) -> str`: the check digit to append to `partial` to make it Luhn-valid.
- `isbn10_valid(isbn: str) -> bool`: ISBN-10 (the last character may be `X` meaning 10).
- `isbn13_valid(isbn: str) -> bool`.
""",
    {
        "checksums.py": '''"""Check digit algorithms."""


def _clean(text):
    return text.replace(" ", "").replace("-", "")


def _luhn_sum(digits):
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total


def luhn_valid(number):
    digits = _clean(number)
    if len(digits) < 2 or not digits.isdigit():
        return False
    return _luhn_sum(digits) % 10 == 0


def luhn_digit(partial):
    digits = _clean(partial)
    for d in "0123456789":
        if _luhn_sum(digits + d) % 10 == 0:
            return d
    raise ValueError("no check digit")


def isbn10_valid(isbn):
    chars = _clean(isbn).upper()
    if len(chars) != 10 or not chars[:9].isdigit() or not (chars[9].isdigit() or chars[9] == "X"):
        return False
    values = [int(c) for c in chars[:9]] + [10 if chars[9] == "X" else int(chars[9])]
    return sum((10 - i) * v for i, v in enumerate(values)) % 11 == 0


def isbn13_valid(isbn):
    chars = _clean(isbn)
    if len(chars) != 13 or not chars.isdigit():
        return False
    return sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(chars)) % 10 == 0
''',
    },
    '''from checksums import isbn10_valid, isbn13_valid, luhn_digit, luhn_valid


def test_luhn_valid():
    assert luhn_valid("4539 1488 0343 6467")
    assert luhn_valid("79927398713")


def test_luhn_invalid():
    assert not luhn_valid("79927398710")
    assert not luhn_valid("0")
    assert not luhn_valid("12a4")


def test_luhn_digit():
    assert luhn_digit("7992739871") == "3"


def test_isbn10():
    assert isbn10_valid("0-306-40615-2")
    assert isbn10_valid("0-8044-2957-X")
    assert not isbn10_valid("0-306-40615-3")


def test_isbn13():
    assert isbn13_valid("978-0-306-40615-7")
    assert not isbn13_valid("978-0-306-40615-6")
''',
)

lib(
    "trie",
    "a prefix tree",
    """
Implement a module `trie` (file `trie.py`) with a class `Trie`:

- `insert(word: str)`; inserting the same word twice counts it once.
- `contains(word) -> bool` (also available as `word in trie`).
- `starts_with(prefix) -> list[str]`: all stored words with that prefix, sorted.
- `remove(word) -> bool`: remove a word, returning whether it was present; other words sharing its
  prefix stay.
- `len(trie)`: the number of stored words.
- `longest_common_prefix() -> str`: of all stored words (`""` when empty).
""",
    {
        "trie.py": '''"""A prefix tree."""


class Trie:
    def __init__(self):
        self._root = {}
        self._size = 0

    def insert(self, word):
        node = self._root
        for ch in word:
            node = node.setdefault(ch, {})
        if "$" not in node:
            node["$"] = True
            self._size += 1

    def _find(self, prefix):
        node = self._root
        for ch in prefix:
            if ch not in node:
                return None
            node = node[ch]
        return node

    def contains(self, word):
        node = self._find(word)
        return node is not None and "$" in node

    __contains__ = contains

    def starts_with(self, prefix):
        node = self._find(prefix)
        found = []

        def walk(current, path):
            for key, child in current.items():
                if key == "$":
                    found.append(path)
                else:
                    walk(child, path + key)

        if node is not None:
            walk(node, prefix)
        return sorted(found)

    def remove(self, word):
        node = self._find(word)
        if node is None or "$" not in node:
            return False
        del node["$"]
        self._size -= 1
        return True

    def __len__(self):
        return self._size

    def longest_common_prefix(self):
        words = self.starts_with("")
        if not words:
            return ""
        prefix = words[0]
        for word in words[1:]:
            while not word.startswith(prefix):
                prefix = prefix[:-1]
        return prefix
''',
    },
    '''from trie import Trie


def make(*words):
    t = Trie()
    for word in words:
        t.insert(word)
    return t


def test_contains():
    t = make("car", "cart")
    assert t.contains("car") and "cart" in t
    assert "ca" not in t


def test_duplicates_counted_once():
    assert len(make("a", "a", "b")) == 2


def test_starts_with():
    assert make("card", "care", "dog", "car").starts_with("car") == ["car", "card", "care"]
    assert make("x").starts_with("y") == []


def test_remove_keeps_prefix_words():
    t = make("car", "cart")
    assert t.remove("car")
    assert "cart" in t and "car" not in t
    assert not t.remove("car")
    assert len(t) == 1


def test_longest_common_prefix():
    assert make("flower", "flow", "flight").longest_common_prefix() == "fl"
    assert Trie().longest_common_prefix() == ""
''',
)

lib(
    "vectors",
    "a 2D vector type",
    """
Implement a module `vectors` (file `vectors.py`) with an immutable class `Vec2(x, y)`:

- attributes `x`, `y`; equality and hashing by value; `repr` is `Vec2(x, y)` (e.g. `Vec2(1, 2)`).
- `+`, `-` between vectors, `*` and `/` by a number (also `number * vector`), unary `-`.
- `dot(other)`, `cross(other)` (the z component, a number), `norm()` (length), `normalized()` (unit
  vector; `ValueError` for the zero vector), `angle_to(other)` (radians between 0 and pi).
- Assigning to `x` or `y` raises `AttributeError`.
""",
    {
        "vectors.py": '''"""An immutable 2D vector."""

import math


class Vec2:
    __slots__ = ("_x", "_y")

    def __init__(self, x, y):
        object.__setattr__(self, "_x", x)
        object.__setattr__(self, "_y", y)

    x = property(lambda self: self._x)
    y = property(lambda self: self._y)

    def __setattr__(self, name, value):
        raise AttributeError("Vec2 is immutable")

    def __eq__(self, other):
        return isinstance(other, Vec2) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self):
        return hash((self.x, self.y))

    def __repr__(self):
        return f"Vec2({self.x}, {self.y})"

    def __add__(self, other):
        return Vec2(self.x + other.x, self.y + other.y)

    def __sub__(self, other):
        return Vec2(self.x - other.x, self.y - other.y)

    def __mul__(self, k):
        return Vec2(self.x * k, self.y * k)

    __rmul__ = __mul__

    def __truediv__(self, k):
        return Vec2(self.x / k, self.y / k)

    def __neg__(self):
        return Vec2(-self.x, -self.y)

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    def cross(self, other):
        return self.x * other.y - self.y * other.x

    def norm(self):
        return math.hypot(self.x, self.y)

    def normalized(self):
        length = self.norm()
        if length == 0:
            raise ValueError("cannot normalize the zero vector")
        return self / length

    def angle_to(self, other):
        cos = self.dot(other) / (self.norm() * other.norm())
        return math.acos(max(-1.0, min(1.0, cos)))
''',
    },
    '''import math

import pytest

from vectors import Vec2


def test_arithmetic():
    assert Vec2(1, 2) + Vec2(3, 4) == Vec2(4, 6)
    assert Vec2(1, 2) - Vec2(3, 4) == Vec2(-2, -2)
    assert 2 * Vec2(1, 2) == Vec2(2, 4) == Vec2(1, 2) * 2
    assert Vec2(2, 4) / 2 == Vec2(1, 2)
    assert -Vec2(1, -1) == Vec2(-1, 1)


def test_repr_and_hash():
    assert repr(Vec2(1, 2)) == "Vec2(1, 2)"
    assert len({Vec2(1, 2), Vec2(1, 2)}) == 1


def test_products():
    assert Vec2(1, 2).dot(Vec2(3, 4)) == 11
    assert Vec2(1, 0).cross(Vec2(0, 1)) == 1


def test_norm_and_normalized():
    assert Vec2(3, 4).norm() == 5
    assert Vec2(0, 2).normalized() == Vec2(0, 1)
    with pytest.raises(ValueError):
        Vec2(0, 0).normalized()


def test_angle():
    assert Vec2(1, 0).angle_to(Vec2(0, 3)) == pytest.approx(math.pi / 2)


def test_immutable():
    v = Vec2(1, 2)
    with pytest.raises(AttributeError):
        v.x = 5
''',
)

lib(
    "morse",
    "Morse code",
    """
Implement a module `morse` (file `morse.py`) for the letters A-Z and digits 0-9 of International Morse
code.

- `encode(text: str) -> str`: letters are separated by one space and words by ` / ` (space, slash,
  space); input is case-insensitive; runs of whitespace separate words. Raise `ValueError` for a
  character that has no code.
- `decode(code: str) -> str`: the inverse, returning upper-case text with single spaces between words;
  `ValueError` for an unknown symbol.
- `CODES`: a dict from each upper-case letter/digit to its code.
""",
    {
        "morse.py": '''"""International Morse code for A-Z and 0-9."""

CODES = {
    "A": ".-", "B": "-...", "C": "-.-.", "D": "-..", "E": ".", "F": "..-.", "G": "--.", "H": "....",
    "I": "..", "J": ".---", "K": "-.-", "L": ".-..", "M": "--", "N": "-.", "O": "---", "P": ".--.",
    "Q": "--.-", "R": ".-.", "S": "...", "T": "-", "U": "..-", "V": "...-", "W": ".--", "X": "-..-",
    "Y": "-.--", "Z": "--..", "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-",
    "5": ".....", "6": "-....", "7": "--...", "8": "---..", "9": "----.",
}
_BACK = {code: ch for ch, code in CODES.items()}


def encode(text):
    words = []
    for word in text.upper().split():
        letters = []
        for ch in word:
            if ch not in CODES:
                raise ValueError(f"no Morse code for {ch!r}")
            letters.append(CODES[ch])
        words.append(" ".join(letters))
    return " / ".join(words)


def decode(code):
    words = []
    for word in code.split(" / "):
        letters = []
        for symbol in word.split():
            if symbol not in _BACK:
                raise ValueError(f"unknown Morse symbol {symbol!r}")
            letters.append(_BACK[symbol])
        words.append("".join(letters))
    return " ".join(words)
''',
    },
    '''import pytest

from morse import CODES, decode, encode


def test_codes_table():
    assert len(CODES) == 36
    assert CODES["S"] == "..."


def test_encode_sos():
    assert encode("sos") == "... --- ..."


def test_encode_words():
    assert encode("Hi  there") == ".... .. / - .... . .-. ."


def test_decode():
    assert decode(".... .. / - .... . .-. .") == "HI THERE"


def test_round_trip_digits():
    assert decode(encode("route 66")) == "ROUTE 66"


def test_errors():
    with pytest.raises(ValueError):
        encode("hi!")
    with pytest.raises(ValueError):
        decode("......")
''',
)

lib(
    "infix",
    "an arithmetic expression evaluator",
    """
Implement a module `infix` (file `infix.py`).

- `evaluate(expression: str) -> float`: evaluate an arithmetic expression with numbers (integers or
  decimals), `+ - * /`, parentheses, unary minus and arbitrary spaces, with the usual precedence
  (`*`/`/` before `+`/`-`, left-associative). The result is a float.
- Do not use `eval`/`exec`. Raise `ValueError` for malformed input (unbalanced parentheses, two
  operators in a row other than a unary minus, stray characters, empty input), `ZeroDivisionError`
  for division by zero.
- `tokenize(expression: str) -> list[str]`: numbers, operators and parentheses as strings, e.g.
  `tokenize("2*(3+4)") == ["2", "*", "(", "3", "+", "4", ")"]`.
""",
    {
        "infix.py": '''"""An arithmetic expression evaluator (recursive descent, no eval)."""

import re

_TOKEN = re.compile(r"\\s*(?:(\\d+(?:\\.\\d+)?)|(.))")


def tokenize(expression):
    tokens = []
    for number, other in _TOKEN.findall(expression):
        if number:
            tokens.append(number)
        elif other.strip():
            if other not in "+-*/()":
                raise ValueError(f"unexpected character {other!r}")
            tokens.append(other)
    return tokens


class _Parser:
    def __init__(self, tokens):
        self.tokens, self.pos = tokens, 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self):
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end of expression")
        self.pos += 1
        return token

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self):
        value = self.factor()
        while self.peek() in ("*", "/"):
            if self.take() == "*":
                value *= self.factor()
            else:
                value /= self.factor()
        return value

    def factor(self):
        token = self.take()
        if token == "-":
            return -self.factor()
        if token == "(":
            value = self.expr()
            if self.take() != ")":
                raise ValueError("missing )")
            return value
        try:
            return float(token)
        except ValueError:
            raise ValueError(f"unexpected token {token!r}") from None


def evaluate(expression):
    tokens = tokenize(expression)
    if not tokens:
        raise ValueError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.peek() is not None:
        raise ValueError(f"unexpected token {parser.peek()!r}")
    return float(value)
''',
    },
    '''import pytest

from infix import evaluate, tokenize


def test_tokenize():
    assert tokenize("2*(3+4)") == ["2", "*", "(", "3", "+", "4", ")"]
    assert tokenize(" 1.5 - 2 ") == ["1.5", "-", "2"]


def test_precedence():
    assert evaluate("2 + 3 * 4") == 14


def test_parentheses():
    assert evaluate("(2 + 3) * 4") == 20


def test_left_associative():
    assert evaluate("10 - 4 - 3") == 3
    assert evaluate("16 / 4 / 2") == 2


def test_unary_minus():
    assert evaluate("-3 * -(2 + 1)") == 9


def test_float_result():
    assert evaluate("7 / 2") == 3.5
    assert isinstance(evaluate("1 + 1"), float)


@pytest.mark.parametrize("bad", ["", "(1 + 2", "1 + * 2", "2 $ 3", "1 2"])
def test_malformed(bad):
    with pytest.raises(ValueError):
        evaluate(bad)


def test_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        evaluate("1 / (2 - 2)")
''',
)

lib(
    "histogram",
    "text histograms",
    """
Implement a module `histogram` (file `histogram.py`).

- `bins(values: list[float], count: int) -> list[int]`: split `[min(values), max(values)]` into `count`
  equal-width bins and count the values in each; the maximum value falls in the last bin. If all
  values are equal, everything goes in the first bin. `ValueError` for empty `values` or `count < 1`.
- `render(data: dict[str, int], width: int = 20, char: str = "#") -> str`: one line per key in the
  given order: the key left-justified to the longest key, a space, a bar of `char` scaled so the
  largest value has `width` characters (rounded to the nearest integer), a space, and the value.
  Lines are joined with newlines, no trailing newline; `""` for empty data. Values must be `>= 0`
  (`ValueError` otherwise); when all values are 0 the bars are empty.
""",
    {
        "histogram.py": '''"""Text histograms."""


def bins(values, count):
    if not values or count < 1:
        raise ValueError("need values and count >= 1")
    low, high = min(values), max(values)
    out = [0] * count
    if low == high:
        out[0] = len(values)
        return out
    width = (high - low) / count
    for value in values:
        index = min(int((value - low) / width), count - 1)
        out[index] += 1
    return out


def render(data, width=20, char="#"):
    if not data:
        return ""
    if any(v < 0 for v in data.values()):
        raise ValueError("values must be >= 0")
    pad = max(len(k) for k in data)
    top = max(data.values())
    lines = []
    for key, value in data.items():
        length = round(value / top * width) if top else 0
        lines.append(f"{key.ljust(pad)} {char * length} {value}")
    return "\\n".join(lines)
''',
    },
    '''import pytest

from histogram import bins, render


def test_bins():
    assert bins([1, 2, 3, 4], 2) == [2, 2]
    assert bins([0, 10], 5) == [1, 0, 0, 0, 1]


def test_bins_constant():
    assert bins([5, 5, 5], 3) == [3, 0, 0]


def test_bins_errors():
    with pytest.raises(ValueError):
        bins([], 3)
    with pytest.raises(ValueError):
        bins([1], 0)


def test_render():
    assert render({"a": 2, "bbb": 4}, width=4) == "a   ## 2\\nbbb #### 4"


def test_render_empty_and_zero():
    assert render({}) == ""
    assert render({"x": 0}, width=3) == "x  0"


def test_render_negative():
    with pytest.raises(ValueError):
        render({"x": -1})
''',
)

lib(
    "jsonpath",
    "a tiny JSON path lookup",
    """
Implement a module `jsonpath` (file `jsonpath.py`) to read nested dict/list data.

- `get(data, path: str, default=None)`: follow a path such as `"a.b[0].c"`: dot-separated keys, each
  optionally followed by one or more `[index]` list indexes (negative indexes count from the end). A
  path may start with an index (`"[1].name"`). Return `default` when a key or index is missing or a
  value has the wrong type for the step. The empty path returns `data`.
- `set_value(data, path, value)`: set the value at `path` in place, creating missing dicts for keys
  (not lists); raise `KeyError` when an index is missing or the path crosses a non-container.
- `parse_path(path) -> list`: the steps as strings (keys) and ints (indexes), e.g.
  `parse_path("a.b[0][-1]") == ["a", "b", 0, -1]`; `ValueError` for malformed paths (`"a..b"`, `"a[x]"`).
""",
    {
        "jsonpath.py": '''"""A tiny JSON path lookup."""

import re

_STEP = re.compile(r"([^.\\[\\]]*)((?:\\[-?\\d+\\])*)$")


def parse_path(path):
    if path == "":
        return []
    steps = []
    for i, part in enumerate(path.split(".")):
        match = _STEP.match(part)
        if not match or (not match.group(1) and not match.group(2)) or (not match.group(1) and i > 0):
            raise ValueError(f"malformed path {path!r}")
        if match.group(1):
            steps.append(match.group(1))
        steps.extend(int(x) for x in re.findall(r"-?\\d+", match.group(2)))
    return steps


def get(data, path, default=None):
    current = data
    for step in parse_path(path):
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return default
        elif not isinstance(current, dict) or step not in current:
            return default
        current = current[step]
    return current


def set_value(data, path, value):
    steps = parse_path(path)
    if not steps:
        raise KeyError("empty path")
    current = data
    for step, following in zip(steps, steps[1:]):
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                raise KeyError(step)
            current = current[step]
        else:
            if not isinstance(current, dict):
                raise KeyError(step)
            if step not in current:
                current[step] = {}
            current = current[step]
    last = steps[-1]
    if isinstance(last, int):
        if not isinstance(current, list) or not -len(current) <= last < len(current):
            raise KeyError(last)
    elif not isinstance(current, dict):
        raise KeyError(last)
    current[last] = value
''',
    },
    '''import pytest

from jsonpath import get, parse_path, set_value

DATA = {"a": {"b": [{"c": 1}, {"c": 2}]}, "list": [10, 20, 30]}


def test_parse_path():
    assert parse_path("a.b[0][-1]") == ["a", "b", 0, -1]
    assert parse_path("[1].name") == [1, "name"]


@pytest.mark.parametrize("bad", ["a..b", "a[x]", "a.[0]"])
def test_parse_bad(bad):
    with pytest.raises(ValueError):
        parse_path(bad)


def test_get_nested():
    assert get(DATA, "a.b[1].c") == 2
    assert get(DATA, "list[-1]") == 30


def test_get_missing_and_wrong_type():
    assert get(DATA, "a.x", "d") == "d"
    assert get(DATA, "list[5]") is None
    assert get(DATA, "list.a") is None


def test_get_empty_path():
    assert get(DATA, "") is DATA


def test_set_value_creates_dicts():
    data = {}
    set_value(data, "x.y.z", 1)
    assert data == {"x": {"y": {"z": 1}}}


def test_set_value_index():
    data = {"l": [1, 2]}
    set_value(data, "l[1]", 5)
    assert data == {"l": [1, 5]}
    with pytest.raises(KeyError):
        set_value(data, "l[7]", 0)
''',
)

lib(
    "textstats",
    "text statistics",
    """
Implement a module `textstats` (file `textstats.py`).

- `sentences(text) -> list[str]`: split on `.`, `!` or `?` (runs of them end one sentence), strip
  whitespace, drop empty pieces; the terminating punctuation is not kept.
- `word_count(text) -> int`: words are maximal runs of letters (apostrophes inside words allowed,
  e.g. `it's`).
- `average_word_length(text) -> float`: letters per word (apostrophes not counted), rounded to 2
  decimals; 0.0 for text without words.
- `reading_time(text, wpm=200) -> int`: minutes to read, rounded up, at least 1 for non-empty text and
  0 for text without words.
""",
    {
        "textstats.py": '''"""Text statistics."""

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
''',
    },
    '''from textstats import average_word_length, reading_time, sentences, word_count


def test_sentences():
    assert sentences("Hi there. How are you?! Fine...") == ["Hi there", "How are you", "Fine"]


def test_word_count():
    assert word_count("It's a dog's life, isn't it?") == 6


def test_average_word_length():
    assert average_word_length("ab abcd") == 3.0
    assert average_word_length("it's") == 3.0
    assert average_word_length("123 !!") == 0.0


def test_reading_time():
    assert reading_time("word " * 401) == 3
    assert reading_time("one") == 1
    assert reading_time("") == 0


def test_reading_time_custom_speed():
    assert reading_time("a b c d", wpm=2) == 2
''',
)

lib(
    "gridpath",
    "shortest paths on character grids",
    """
Implement a module `gridpath` (file `gridpath.py`) for mazes given as lists of equal-length strings
where `#` is a wall and any other character is open.

- `find(grid, char) -> tuple[int, int]`: the (row, column) of the first occurrence of `char` scanning
  rows top to bottom; `ValueError` if absent.
- `neighbours(grid, cell) -> list[tuple[int, int]]`: open cells up, down, left, right (in that order)
  inside the grid.
- `shortest(grid, start, goal) -> int`: the number of steps of a shortest path between two cells, or
  -1 when unreachable.
- `solve(grid) -> int`: `shortest` from the cell marked `S` to the cell marked `G`.
""",
    {
        "gridpath.py": '''"""Shortest paths on character grids."""

from collections import deque


def find(grid, char):
    for r, row in enumerate(grid):
        c = row.find(char)
        if c >= 0:
            return r, c
    raise ValueError(f"{char!r} not in grid")


def neighbours(grid, cell):
    r, c = cell
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < len(grid) and 0 <= nc < len(grid[nr]) and grid[nr][nc] != "#":
            out.append((nr, nc))
    return out


def shortest(grid, start, goal):
    distance = {start: 0}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            return distance[cell]
        for nxt in neighbours(grid, cell):
            if nxt not in distance:
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return -1


def solve(grid):
    return shortest(grid, find(grid, "S"), find(grid, "G"))
''',
    },
    '''import pytest

from gridpath import find, neighbours, shortest, solve

MAZE = [
    "S.#.",
    ".##.",
    "...G",
]


def test_find():
    assert find(MAZE, "G") == (2, 3)
    with pytest.raises(ValueError):
        find(MAZE, "X")


def test_neighbours_order_and_walls():
    assert neighbours(MAZE, (0, 0)) == [(1, 0), (0, 1)]
    assert neighbours(MAZE, (2, 1)) == [(2, 0), (2, 2)]


def test_solve():
    assert solve(MAZE) == 5


def test_unreachable():
    assert shortest(["S#G"], (0, 0), (0, 2)) == -1


def test_same_cell():
    assert shortest(MAZE, (0, 0), (0, 0)) == 0
''',
)

lib(
    "ringlog",
    "a bounded log buffer",
    """
Implement a module `ringlog` (file `ringlog.py`) with a class `RingLog(capacity: int)` that keeps the
most recent log records (`ValueError` if capacity < 1).

- `log(level: str, message: str)`: level is one of `DEBUG`, `INFO`, `WARNING`, `ERROR` (case-insensitive,
  stored upper-case; `ValueError` otherwise). Each record gets a sequence number starting at 1 that
  keeps increasing even when old records are dropped.
- `records(min_level="DEBUG") -> list[tuple[int, str, str]]`: kept `(number, level, message)` tuples,
  oldest first, with level at least `min_level` (order DEBUG < INFO < WARNING < ERROR).
- `dropped` attribute: how many records were discarded because the buffer was full.
- `clear()`: remove all records (numbering continues, `dropped` unchanged).
""",
    {
        "ringlog.py": '''"""A bounded log buffer."""

from collections import deque

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class RingLog:
    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._records = deque(maxlen=capacity)
        self._next = 1
        self.dropped = 0

    def log(self, level, message):
        level = level.upper()
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}")
        if len(self._records) == self._records.maxlen:
            self.dropped += 1
        self._records.append((self._next, level, message))
        self._next += 1

    def records(self, min_level="DEBUG"):
        floor = LEVELS.index(min_level.upper())
        return [r for r in self._records if LEVELS.index(r[1]) >= floor]

    def clear(self):
        self._records.clear()
''',
    },
    '''import pytest

from ringlog import RingLog


def test_keeps_latest():
    log = RingLog(2)
    for i in range(3):
        log.log("info", f"m{i}")
    assert log.records() == [(2, "INFO", "m1"), (3, "INFO", "m2")]
    assert log.dropped == 1


def test_level_filter():
    log = RingLog(5)
    log.log("DEBUG", "a")
    log.log("error", "b")
    log.log("Warning", "c")
    assert log.records("warning") == [(2, "ERROR", "b"), (3, "WARNING", "c")]


def test_bad_level_and_capacity():
    with pytest.raises(ValueError):
        RingLog(1).log("TRACE", "x")
    with pytest.raises(ValueError):
        RingLog(0)


def test_dropped_counts_every_overflow():
    log = RingLog(1)
    for i in range(4):
        log.log("debug", str(i))
    assert log.dropped == 3
    assert log.records() == [(4, "DEBUG", "3")]


def test_clear_keeps_numbering():
    log = RingLog(3)
    log.log("info", "a")
    log.clear()
    log.log("info", "b")
    assert log.records() == [(2, "INFO", "b")]
''',
)

lib(
    "units",
    "length unit conversion",
    """
Implement a module `units` (file `units.py`) converting lengths between `mm`, `cm`, `m`, `km`, `in`,
`ft`, `yd` and `mi` (1 in = 2.54 cm, 1 ft = 12 in, 1 yd = 3 ft, 1 mi = 1760 yd).

- `convert(value: float, source: str, target: str) -> float`: rounded to 6 decimals; unit names are
  case-insensitive; `ValueError` for an unknown unit.
- `parse(text: str) -> tuple[float, str]`: `"12.5 km"` or `"3ft"` into `(12.5, "km")` / `(3.0, "ft")`
  (unit lower-cased, must be known); `ValueError` otherwise.
- `to_feet_inches(meters: float) -> str`: e.g. `to_feet_inches(1.8) == "5' 11\\""` (whole feet and the
  remaining inches rounded to the nearest whole inch; 12 rounded inches carry into a foot).
""",
    {
        "units.py": '''"""Length unit conversion."""

import re

METERS = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254}
METERS["ft"] = METERS["in"] * 12
METERS["yd"] = METERS["ft"] * 3
METERS["mi"] = METERS["yd"] * 1760


def _unit(name):
    unit = name.lower()
    if unit not in METERS:
        raise ValueError(f"unknown unit {name!r}")
    return unit


def convert(value, source, target):
    return round(value * METERS[_unit(source)] / METERS[_unit(target)], 6)


def parse(text):
    match = re.fullmatch(r"\\s*(-?\\d+(?:\\.\\d+)?)\\s*([A-Za-z]+)\\s*", text)
    if not match:
        raise ValueError(f"not a length: {text!r}")
    return float(match.group(1)), _unit(match.group(2))


def to_feet_inches(meters):
    inches = round(meters / METERS["in"])
    feet, rest = divmod(inches, 12)
    return f"{feet}' {rest}\\""
''',
    },
    '''import pytest

from units import convert, parse, to_feet_inches


def test_metric():
    assert convert(1.5, "km", "m") == 1500
    assert convert(25, "MM", "cm") == 2.5


def test_imperial():
    assert convert(1, "ft", "in") == 12
    assert convert(1, "mi", "km") == 1.609344


def test_unknown_unit():
    with pytest.raises(ValueError):
        convert(1, "league", "m")


def test_parse():
    assert parse("12.5 km") == (12.5, "km")
    assert parse("3FT") == (3.0, "ft")
    with pytest.raises(ValueError):
        parse("far")


def test_feet_inches():
    assert to_feet_inches(1.8) == "5' 11\\""
    assert to_feet_inches(0.3048) == "1' 0\\""
''',
)

lib(
    "scheduler",
    "a meeting-room scheduler",
    """
Implement a module `scheduler` (file `scheduler.py`). Times are minutes since midnight (ints) and
meetings are half-open intervals `[start, end)`.

- `class Conflict(Exception)`.
- `class Room(name)`: `book(start, end, title)` adds a meeting; raise `ValueError` if `start >= end`
  or the times are outside `0..1440`, and `Conflict` if it overlaps an existing meeting (touching ends
  are fine). `cancel(title) -> bool` removes the meeting with that title. `meetings()` returns
  `(start, end, title)` tuples sorted by start.
- `free_slots(room, day_start=0, day_end=1440, minimum=1) -> list[tuple[int, int]]`: the gaps between
  meetings within the day that are at least `minimum` minutes long, in order.
- `to_minutes("09:30") == 570` and `to_clock(570) == "09:30"` helpers (`ValueError` for bad input).
""",
    {
        "scheduler.py": '''"""A meeting-room scheduler."""

import re


class Conflict(Exception):
    pass


def to_minutes(text):
    match = re.fullmatch(r"(\\d{1,2}):(\\d{2})", text)
    if not match or int(match.group(1)) > 24 or int(match.group(2)) > 59:
        raise ValueError(f"bad time {text!r}")
    total = int(match.group(1)) * 60 + int(match.group(2))
    if total > 1440:
        raise ValueError(f"bad time {text!r}")
    return total


def to_clock(minutes):
    if not 0 <= minutes <= 1440:
        raise ValueError("minutes out of range")
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


class Room:
    def __init__(self, name):
        self.name = name
        self._meetings = []

    def book(self, start, end, title):
        if not 0 <= start < end <= 1440:
            raise ValueError("bad meeting times")
        for s, e, t in self._meetings:
            if start < e and s < end:
                raise Conflict(f"{title!r} overlaps {t!r}")
        self._meetings.append((start, end, title))
        self._meetings.sort()

    def cancel(self, title):
        for meeting in self._meetings:
            if meeting[2] == title:
                self._meetings.remove(meeting)
                return True
        return False

    def meetings(self):
        return list(self._meetings)


def free_slots(room, day_start=0, day_end=1440, minimum=1):
    slots, cursor = [], day_start
    for start, end, _ in room.meetings():
        if end <= day_start or start >= day_end:
            continue
        if start - cursor >= minimum:
            slots.append((cursor, start))
        cursor = max(cursor, end)
    if day_end - cursor >= minimum:
        slots.append((cursor, day_end))
    return slots
''',
    },
    '''import pytest

from scheduler import Conflict, Room, free_slots, to_clock, to_minutes


def test_clock_helpers():
    assert to_minutes("09:30") == 570
    assert to_clock(570) == "09:30"
    with pytest.raises(ValueError):
        to_minutes("9h30")


def test_book_and_sort():
    room = Room("r")
    room.book(600, 660, "b")
    room.book(540, 600, "a")
    assert room.meetings() == [(540, 600, "a"), (600, 660, "b")]


def test_conflict():
    room = Room("r")
    room.book(540, 600, "a")
    with pytest.raises(Conflict):
        room.book(570, 630, "b")


def test_bad_times():
    with pytest.raises(ValueError):
        Room("r").book(600, 600, "x")


def test_cancel():
    room = Room("r")
    room.book(0, 10, "x")
    assert room.cancel("x") and not room.cancel("x")
    assert room.meetings() == []


def test_free_slots():
    room = Room("r")
    room.book(540, 600, "a")
    room.book(630, 700, "b")
    assert free_slots(room, 480, 720) == [(480, 540), (600, 630), (700, 720)]
    assert free_slots(room, 480, 720, minimum=45) == [(480, 540)]
''',
)

lib(
    "slugs",
    "URL slugs",
    """
Implement a module `slugs` (file `slugs.py`).

- `slugify(text: str, max_length: int = 50) -> str`: lower-case; accented Latin letters are reduced to
  their base letter (use `unicodedata` NFKD and drop combining marks); every run of characters other
  than `a-z0-9` becomes a single `-`; no leading/trailing `-`; cut to `max_length` characters without
  leaving a trailing `-`.
- `unique_slug(text: str, taken: set[str]) -> str`: `slugify(text)`, or with `-2`, `-3`, ... appended
  (the first free one) if already in `taken`.
- `is_slug(text: str) -> bool`: True for non-empty strings that `slugify` leaves unchanged.
""",
    {
        "slugs.py": '''"""URL slugs."""

import re
import unicodedata


def slugify(text, max_length=50):
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()
    slug = re.sub(r"[^a-z0-9]+", "-", plain).strip("-")
    return slug[:max_length].rstrip("-")


def unique_slug(text, taken):
    base = slugify(text)
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def is_slug(text):
    return bool(text) and slugify(text, max_length=len(text)) == text
''',
    },
    '''from slugs import is_slug, slugify, unique_slug


def test_basic():
    assert slugify("Hello, World!") == "hello-world"


def test_accents():
    assert slugify("Crème Brûlée à la carte") == "creme-brulee-a-la-carte"


def test_max_length_no_trailing_dash():
    assert slugify("abc def ghi", max_length=4) == "abc"


def test_unique():
    assert unique_slug("My Post", set()) == "my-post"
    assert unique_slug("My Post", {"my-post", "my-post-2"}) == "my-post-3"


def test_is_slug():
    assert is_slug("a-b-1")
    assert not is_slug("A b")
    assert not is_slug("")
    assert not is_slug("-a")
''',
)

lib(
    "tabular",
    "plain-text tables",
    """
Implement a module `tabular` (file `tabular.py`).

- `render(rows: list[list], header: list[str] | None = None, align: str | None = None) -> str`: a
  plain-text table. Cells are converted with `str`. Columns are separated by ` | `; each column is as
  wide as its widest cell (header included). With a header, it is followed by a separator line made of
  `-` per column width joined by `-+-`. `align` is a string with one letter per column: `l` (default),
  `r` or `c` (`str.center`). Lines have no trailing spaces, and are joined with newlines (no final
  newline). Raise `ValueError` when rows have different lengths from each other or from the header, or
  `align` has the wrong length or letters.
""",
    {
        "tabular.py": '''"""Plain-text tables."""


def render(rows, header=None, align=None):
    table = ([list(header)] if header is not None else []) + [list(r) for r in rows]
    if not table:
        return ""
    cols = len(table[0])
    if any(len(r) != cols for r in table):
        raise ValueError("rows have different lengths")
    align = align or "l" * cols
    if len(align) != cols or set(align) - set("lrc"):
        raise ValueError("bad align string")
    cells = [[str(c) for c in r] for r in table]
    widths = [max(len(r[i]) for r in cells) for i in range(cols)]

    def line(r):
        parts = []
        for text, width, how in zip(r, widths, align):
            parts.append(text.ljust(width) if how == "l" else text.rjust(width) if how == "r" else text.center(width))
        return " | ".join(parts).rstrip()

    lines = [line(r) for r in cells]
    if header is not None:
        lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\\n".join(lines)
''',
    },
    '''import pytest

from tabular import render


def test_plain():
    assert render([["a", 1], ["bb", 22]]) == "a  | 1\\nbb | 22"


def test_header():
    assert render([[1, 2]], header=["x", "yy"]) == "x | yy\\n--+---\\n1 | 2"


def test_align():
    assert render([["a", 1], ["bbb", 100]], align="rr") == "  a |   1\\nbbb | 100"
    assert render([["a"], ["abc"]], align="c") == " a\\nabc"


def test_empty_table():
    assert render([]) == ""


def test_errors():
    with pytest.raises(ValueError):
        render([[1, 2], [3]])
    with pytest.raises(ValueError):
        render([[1]], header=["a", "b"])
    with pytest.raises(ValueError):
        render([[1]], align="x")
''',
)

lib(
    "cipherkit",
    "Vigenère and XOR ciphers",
    """
Implement a module `cipherkit` (file `cipherkit.py`).

- `vigenere_encrypt(text, key)` / `vigenere_decrypt(text, key)`: shift each ASCII letter of `text` by
  the alphabet position of the next key letter (`a`/`A` = 0), keeping case; non-letters are copied and
  do not consume key letters. The key must be non-empty letters only (case-insensitive), else
  `ValueError`.
- `xor_bytes(data: bytes, key: bytes) -> bytes`: XOR with the key repeated; `ValueError` for an empty
  key.
- `to_hex(data: bytes) -> str` and `from_hex(text: str) -> bytes` (lower-case hex, `ValueError` for
  invalid hex).
""",
    {
        "cipherkit.py": '''"""Vigenere and XOR ciphers."""

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
''',
    },
    '''import pytest

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
    assert xor_bytes(b"\\x00\\x01", b"\\xff") == b"\\xff\\xfe"
    with pytest.raises(ValueError):
        xor_bytes(b"x", b"")


def test_hex():
    assert to_hex(b"\\x01\\xab") == "01ab"
    assert from_hex("01AB") == b"\\x01\\xab"
    with pytest.raises(ValueError):
        from_hex("zz")
''',
)

lib(
    "statsig",
    "running statistics",
    """
Implement a module `statsig` (file `statsig.py`) with a class `Running` that keeps statistics of a
stream of numbers without storing them (Welford's algorithm):

- `add(x)` (returns `self` so calls can chain) and `extend(iterable)`.
- properties `count`, `mean`, `variance` (sample variance, n - 1), `stdev`, `minimum`, `maximum`.
  `mean`, `minimum` and `maximum` raise `ValueError` when empty; `variance`/`stdev` need at least two
  values (`ValueError` otherwise).
- `merge(other) -> Running`: a new object equivalent to having added both streams.
""",
    {
        "statsig.py": '''"""Running statistics (Welford)."""

import math


class Running:
    def __init__(self):
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._min = math.inf
        self._max = -math.inf

    def add(self, x):
        self._n += 1
        delta = x - self._mean
        self._mean += delta / self._n
        self._m2 += delta * (x - self._mean)
        self._min = min(self._min, x)
        self._max = max(self._max, x)
        return self

    def extend(self, values):
        for x in values:
            self.add(x)
        return self

    @property
    def count(self):
        return self._n

    def _need(self, n):
        if self._n < n:
            raise ValueError("not enough data")

    @property
    def mean(self):
        self._need(1)
        return self._mean

    @property
    def variance(self):
        self._need(2)
        return self._m2 / (self._n - 1)

    @property
    def stdev(self):
        return math.sqrt(self.variance)

    @property
    def minimum(self):
        self._need(1)
        return self._min

    @property
    def maximum(self):
        self._need(1)
        return self._max

    def merge(self, other):
        out = Running()
        n = self._n + other._n
        if n == 0:
            return out
        delta = other._mean - self._mean
        out._n = n
        out._mean = self._mean + delta * other._n / n
        out._m2 = self._m2 + other._m2 + delta * delta * self._n * other._n / n
        out._min = min(self._min, other._min)
        out._max = max(self._max, other._max)
        return out
''',
    },
    '''import statistics

import pytest

from statsig import Running

DATA = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]


def test_mean_and_variance():
    r = Running().extend(DATA)
    assert r.count == 8
    assert r.mean == pytest.approx(5.0)
    assert r.variance == pytest.approx(statistics.variance(DATA))
    assert r.stdev == pytest.approx(statistics.stdev(DATA))


def test_min_max_and_chaining():
    r = Running().add(3).add(-1).add(2)
    assert (r.minimum, r.maximum) == (-1, 3)


def test_empty_errors():
    with pytest.raises(ValueError):
        Running().mean
    with pytest.raises(ValueError):
        Running().add(1).variance


def test_merge_with_empty():
    r = Running().extend([1.0, 3.0]).merge(Running())
    assert (r.count, r.mean) == (2, 2.0)
    assert Running().merge(Running()).count == 0


def test_merge():
    a = Running().extend(DATA[:3])
    b = Running().extend(DATA[3:])
    merged = a.merge(b)
    assert merged.count == 8
    assert merged.mean == pytest.approx(5.0)
    assert merged.variance == pytest.approx(statistics.variance(DATA))
    assert merged.maximum == 9.0
''',
)

lib(
    "dependency",
    "dependency resolution",
    """
Implement a module `dependency` (file `dependency.py`).

- `class CycleError(Exception)` with an attribute `cycle`: a list of names forming the cycle, starting
  and ending with the same name (e.g. `["a", "b", "a"]`).
- `install_order(deps: dict[str, list[str]], targets: list[str] | None = None) -> list[str]`: an order
  in which to install packages so that each comes after its dependencies. `deps` maps a package to the
  packages it needs; a package named only as a dependency has none. With `targets`, include only the
  targets and what they need. Among the packages whose dependencies are satisfied, pick them in the
  order of a depth-first visit of the targets (or of `deps` keys in sorted order) — concretely, the
  result is the post-order of a DFS that visits dependencies in sorted order. Raise `CycleError` on a
  cycle and `KeyError` for an unknown target.
""",
    {
        "dependency.py": '''"""Dependency resolution."""


class CycleError(Exception):
    def __init__(self, cycle):
        super().__init__(" -> ".join(cycle))
        self.cycle = cycle


def install_order(deps, targets=None):
    known = set(deps) | {d for needs in deps.values() for d in needs}
    if targets is None:
        targets = sorted(deps)
    for target in targets:
        if target not in known:
            raise KeyError(target)
    order, done, stack = [], set(), []

    def visit(name):
        if name in done:
            return
        if name in stack:
            raise CycleError(stack[stack.index(name):] + [name])
        stack.append(name)
        for dep in sorted(deps.get(name, ())):
            visit(dep)
        stack.pop()
        done.add(name)
        order.append(name)

    for target in targets:
        visit(target)
    return order
''',
    },
    '''import pytest

from dependency import CycleError, install_order

DEPS = {"app": ["web", "db"], "web": ["http"], "db": ["driver"], "cli": ["http"]}


def test_full_order():
    assert install_order(DEPS) == ["driver", "db", "http", "web", "app", "cli"]


def test_targets():
    assert install_order(DEPS, ["web"]) == ["http", "web"]


def test_dependencies_first():
    order = install_order(DEPS)
    for package, needs in DEPS.items():
        for need in needs:
            assert order.index(need) < order.index(package)


def test_cycle():
    with pytest.raises(CycleError) as info:
        install_order({"a": ["b"], "b": ["a"]})
    assert info.value.cycle == ["a", "b", "a"]


def test_unknown_target():
    with pytest.raises(KeyError):
        install_order(DEPS, ["nope"])
''',
)
