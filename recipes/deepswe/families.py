"""The bug catalogue of the built-in DeepSWE mini suite (read by make_tasks.py).

Each family is one small pure-stdlib Python repository (a package with one module, and a pytest file);
each of its bugs is one SWE-bench-style instance: the bug is injected into the correct module by
replacing ``fixed`` with ``buggy`` (each must occur exactly once), ``new_tests`` are appended to the test
file by the instance's ``test_patch``, and the gold ``patch`` reverts the bug. Bugs are varied on
purpose: off-by-one, wrong operator, missing edge case, wrong default, missing step, wrong constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Bug:
    name: str
    kind: str
    fixed: str
    buggy: str
    new_tests: str
    statement: str


@dataclass(frozen=True)
class Family:
    package: str
    module: str
    summary: str
    source: str
    tests: str
    bugs: tuple[Bug, ...] = field(default_factory=tuple)


TEXTKIT = Family(
    package="textkit",
    module="text",
    summary="small text helpers: truncate, slugify, wrap",
    source='''"""Small text helpers."""


def truncate(text, width, suffix="..."):
    """Shorten text to at most width characters, ending with suffix when it was cut."""
    if width < len(suffix):
        raise ValueError("width must be at least len(suffix)")
    if len(text) <= width:
        return text
    return text[: width - len(suffix)] + suffix


def slugify(text):
    """Lower-case alphanumeric words joined by single dashes; other characters dropped."""
    out = []
    for ch in text.lower():
        if ch.isalnum():
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-")


def wrap(text, width):
    """Greedy word wrap into lines of at most width characters (a longer word stays whole)."""
    lines, current = [], ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines
''',
    tests='''import pytest

from textkit.text import slugify, truncate, wrap


def test_truncate_short_text_unchanged():
    assert truncate("abc", 10) == "abc"


def test_truncate_rejects_tiny_width():
    with pytest.raises(ValueError):
        truncate("abcdef", 2)


def test_slugify_simple():
    assert slugify("Hello World") == "hello-world"


def test_wrap_fits_on_one_line():
    assert wrap("a b", 10) == ["a b"]
''',
    bugs=(
        Bug(
            name="truncate-off-by-one",
            kind="off-by-one",
            fixed="return text[: width - len(suffix)] + suffix",
            buggy="return text[: width - len(suffix) + 1] + suffix",
            new_tests='''

def test_truncate_respects_width():
    assert truncate("abcdefghij", 6) == "abc..."
    assert len(truncate("abcdefghij", 7)) == 7
''',
            statement="""truncate() returns strings longer than the requested width

```python
>>> from textkit.text import truncate
>>> truncate("abcdefghij", 6)
'abcd...'
```

The docstring says the result has at most `width` characters, but it has `width + 1` whenever the text
is cut. Expected `'abc...'`.
""",
        ),
        Bug(
            name="slugify-repeated-dashes",
            kind="missing edge case",
            fixed='elif out and out[-1] != "-":',
            buggy="elif out:",
            new_tests='''

def test_slugify_collapses_separators():
    assert slugify("Hello,  World!") == "hello-world"
    assert slugify("a -- b") == "a-b"
''',
            statement="""slugify() produces double dashes for punctuation followed by spaces

`slugify("Hello,  World!")` returns `"hello---world"`. Slugs should have single dashes between words
(`"hello-world"`), whatever run of non-alphanumeric characters separates them.
""",
        ),
        Bug(
            name="wrap-exact-width",
            kind="wrong operator",
            fixed="if current and len(current) + 1 + len(word) > width:",
            buggy="if current and len(current) + 1 + len(word) >= width:",
            new_tests='''

def test_wrap_line_of_exact_width():
    assert wrap("aa bb cc", 5) == ["aa bb", "cc"]
''',
            statement="""wrap() breaks lines that fit exactly

`wrap("aa bb cc", 5)` gives `["aa", "bb", "cc"]` but `"aa bb"` is 5 characters and fits in a width of
5, so the expected result is `["aa bb", "cc"]`.
""",
        ),
    ),
)

STATKIT = Family(
    package="statkit",
    module="stats",
    summary="descriptive statistics: mean, median, clamp, variance",
    source='''"""Descriptive statistics without dependencies."""


def mean(values):
    values = list(values)
    if not values:
        raise ValueError("mean of empty data")
    return sum(values) / len(values)


def median(values):
    data = sorted(values)
    if not data:
        raise ValueError("median of empty data")
    mid = len(data) // 2
    if len(data) % 2:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2


def clamp(value, low, high):
    """value limited to the closed range [low, high]."""
    if low > high:
        raise ValueError("low must not exceed high")
    return max(low, min(value, high))


def variance(values, sample=True):
    """Sample variance (divides by n - 1) by default; population variance with sample=False."""
    data = list(values)
    n = len(data)
    if n < (2 if sample else 1):
        raise ValueError("not enough data")
    m = sum(data) / n
    total = sum((x - m) ** 2 for x in data)
    return total / (n - 1 if sample else n)
''',
    tests='''import pytest

from statkit.stats import clamp, mean, median, variance


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_median_odd():
    assert median([3, 1, 2]) == 2


def test_clamp_rejects_inverted_range():
    with pytest.raises(ValueError):
        clamp(1, 5, 0)


def test_population_variance():
    assert variance([1, 3], sample=False) == 1
''',
    bugs=(
        Bug(
            name="mean-empty",
            kind="missing edge case",
            fixed='''    if not values:
        raise ValueError("mean of empty data")
    return sum(values) / len(values)''',
            buggy='''    return sum(values) / len(values)''',
            new_tests='''

def test_mean_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        mean([])
''',
            statement="""mean([]) raises ZeroDivisionError

`median([])` raises `ValueError("median of empty data")`, but `mean([])` crashes with
`ZeroDivisionError`. It should raise `ValueError` too, so callers can handle both the same way.
""",
        ),
        Bug(
            name="median-even",
            kind="missing case",
            fixed='''    if len(data) % 2:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2''',
            buggy='''    return data[mid]''',
            new_tests='''

def test_median_even_count_averages_middle_pair():
    assert median([4, 1, 3, 2]) == 2.5
''',
            statement="""median() is wrong for an even number of values

`median([1, 2, 3, 4])` returns `3`. The median of an even-length sample is the mean of the two middle
values: `2.5`.
""",
        ),
        Bug(
            name="clamp-swapped",
            kind="wrong operator",
            fixed="return max(low, min(value, high))",
            buggy="return min(low, max(value, high))",
            new_tests='''

def test_clamp_inside_and_outside():
    assert clamp(5, 0, 10) == 5
    assert clamp(-1, 0, 10) == 0
    assert clamp(11, 0, 10) == 10
''',
            statement="""clamp() returns the lower bound for values inside the range

`clamp(5, 0, 10)` returns `0`; it should return `5`. Values below the range should give `low` and
values above it `high`.
""",
        ),
        Bug(
            name="variance-default",
            kind="wrong default",
            fixed="def variance(values, sample=True):",
            buggy="def variance(values, sample=False):",
            new_tests='''

def test_variance_defaults_to_sample():
    assert variance([1, 2, 3, 4]) == pytest.approx(5 / 3)
''',
            statement="""variance() computes the population variance by default

The docstring promises the sample variance (dividing by n - 1) unless `sample=False` is passed, but
`variance([1, 2, 3, 4])` returns `1.25` instead of `1.666...`.
""",
        ),
    ),
)

SPANS = Family(
    package="spans",
    module="intervals",
    summary="closed integer intervals: overlap test, merging, covered length",
    source='''"""Closed intervals given as (start, end) tuples."""


def overlaps(a, b):
    """True when the closed intervals a and b share at least one point."""
    return a[0] <= b[1] and b[0] <= a[1]


def merge(intervals):
    """Merge overlapping intervals; the result is sorted by start."""
    result = []
    for start, end in sorted(intervals):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


def total_length(intervals):
    """Number of integer points covered by closed integer intervals."""
    return sum(end - start + 1 for start, end in merge(intervals))
''',
    tests='''from spans.intervals import merge, overlaps, total_length


def test_disjoint_do_not_overlap():
    assert not overlaps((1, 2), (5, 6))


def test_nested_overlap():
    assert overlaps((1, 5), (2, 3))


def test_merge_sorted_disjoint():
    assert merge([(1, 2), (4, 5)]) == [(1, 2), (4, 5)]


def test_total_length_empty():
    assert total_length([]) == 0
''',
    bugs=(
        Bug(
            name="overlaps-touching",
            kind="wrong operator",
            fixed="return a[0] <= b[1] and b[0] <= a[1]",
            buggy="return a[0] < b[1] and b[0] < a[1]",
            new_tests='''

def test_touching_closed_intervals_overlap():
    assert overlaps((1, 3), (3, 5))
    assert overlaps((3, 5), (1, 3))
''',
            statement="""overlaps() says (1, 3) and (3, 5) do not overlap

The intervals are closed, so they share the point 3 and `overlaps((1, 3), (3, 5))` should be `True`.
""",
        ),
        Bug(
            name="merge-unsorted",
            kind="missing step",
            fixed="for start, end in sorted(intervals):",
            buggy="for start, end in intervals:",
            new_tests='''

def test_merge_unsorted_input():
    assert merge([(5, 6), (1, 2), (2, 4)]) == [(1, 4), (5, 6)]
''',
            statement="""merge() only works on sorted input

`merge([(5, 6), (1, 2), (2, 4)])` returns `[(5, 6)]`: the earlier intervals are swallowed by the first
one. The docstring says the result is sorted by start and only overlapping intervals are merged,
whatever the input order: expected `[(1, 4), (5, 6)]`.
""",
        ),
        Bug(
            name="length-inclusive",
            kind="off-by-one",
            fixed="return sum(end - start + 1 for start, end in merge(intervals))",
            buggy="return sum(end - start for start, end in merge(intervals))",
            new_tests='''

def test_total_length_counts_both_ends():
    assert total_length([(1, 3)]) == 3
    assert total_length([(1, 3), (2, 6), (10, 10)]) == 7
''',
            statement="""total_length() undercounts closed intervals

`total_length([(1, 3)])` returns 2, but the closed interval covers the points 1, 2 and 3.
""",
        ),
    ),
)

PAGER = Family(
    package="pager",
    module="pages",
    summary="pagination helpers",
    source='''"""Pagination helpers (pages are numbered from 1)."""

import math


def page_count(total, per_page):
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return math.ceil(total / per_page)


def page(items, number, per_page):
    """Items on page `number`; an empty list past the last page."""
    if number < 1:
        raise ValueError("pages start at 1")
    start = (number - 1) * per_page
    return list(items[start : start + per_page])


def page_range(current, count, window=2):
    """Page numbers to show around `current`, clipped to 1..count."""
    low = max(1, current - window)
    high = min(count, current + window)
    return list(range(low, high + 1))
''',
    tests='''import pytest

from pager.pages import page, page_count, page_range


def test_page_count_exact():
    assert page_count(10, 5) == 2


def test_page_count_rejects_zero():
    with pytest.raises(ValueError):
        page_count(10, 0)


def test_page_zero_is_invalid():
    with pytest.raises(ValueError):
        page([1, 2], 0, 1)


def test_page_past_the_end_is_empty():
    assert page([1, 2, 3], 5, 2) == []
''',
    bugs=(
        Bug(
            name="page-count-floor",
            kind="wrong rounding",
            fixed="return math.ceil(total / per_page)",
            buggy="return total // per_page",
            new_tests='''

def test_page_count_partial_last_page():
    assert page_count(11, 5) == 3
''',
            statement="""page_count() drops the last partial page

With 11 items and 5 per page there are 3 pages, but `page_count(11, 5)` returns 2.
""",
        ),
        Bug(
            name="page-start",
            kind="off-by-one",
            fixed="start = (number - 1) * per_page",
            buggy="start = number * per_page",
            new_tests='''

def test_first_page():
    assert page(list(range(1, 11)), 1, 3) == [1, 2, 3]
    assert page(list(range(1, 11)), 4, 3) == [10]
''',
            statement="""page(items, 1, n) skips the first page

Pages are numbered from 1, but `page([1, ..., 10], 1, 3)` returns `[4, 5, 6]` instead of `[1, 2, 3]`.
""",
        ),
        Bug(
            name="page-range-upper",
            kind="off-by-one",
            fixed="return list(range(low, high + 1))",
            buggy="return list(range(low, high))",
            new_tests='''

def test_page_range_window():
    assert page_range(5, 10) == [3, 4, 5, 6, 7]
    assert page_range(10, 10) == [8, 9, 10]
''',
            statement="""page_range() never includes the upper page

`page_range(5, 10)` returns `[3, 4, 5, 6]`; with the default window of 2 it should be
`[3, 4, 5, 6, 7]`, and `page_range(10, 10)` should end with the last page.
""",
        ),
    ),
)

LRU = Family(
    package="lru",
    module="cache",
    summary="a least-recently-used cache",
    source='''"""A least-recently-used cache."""

from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity):
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity = capacity
        self._data = OrderedDict()

    def get(self, key, default=None):
        """The cached value (and mark it most recently used), or default."""
        if key not in self._data:
            return default
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key, value):
        if self.capacity == 0:
            return
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data
''',
    tests='''import pytest

from lru.cache import LRUCache


def test_put_then_get():
    cache = LRUCache(3)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert len(cache) == 1


def test_missing_key():
    assert LRUCache(2).get("nope") is None


def test_negative_capacity():
    with pytest.raises(ValueError):
        LRUCache(-1)


def test_contains():
    cache = LRUCache(3)
    cache.put("x", 0)
    assert "x" in cache
''',
    bugs=(
        Bug(
            name="get-refresh",
            kind="missing step",
            fixed='''        self._data.move_to_end(key)
        return self._data[key]''',
            buggy='''        return self._data[key]''',
            new_tests='''

def test_get_marks_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert "a" in cache and "c" in cache and "b" not in cache
''',
            statement="""LRUCache evicts an entry that was just read

After `put("a")`, `put("b")`, `get("a")`, `put("c")` on a cache of capacity 2, `"a"` is evicted. Reading
a key should make it the most recently used one, so `"b"` should go.
""",
        ),
        Bug(
            name="evict-early",
            kind="wrong operator",
            fixed="if len(self._data) > self.capacity:",
            buggy="if len(self._data) >= self.capacity:",
            new_tests='''

def test_holds_capacity_items():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert len(cache) == 2
    assert cache.get("a") == 1
''',
            statement="""LRUCache holds one item fewer than its capacity

`LRUCache(2)` with two keys put in only keeps one of them.
""",
        ),
        Bug(
            name="get-default",
            kind="wrong default",
            fixed='''        if key not in self._data:
            return default''',
            buggy='''        if key not in self._data:
            return None''',
            new_tests='''

def test_get_returns_given_default():
    assert LRUCache(2).get("x", 5) == 5
''',
            statement="""LRUCache.get ignores its default argument

`LRUCache(2).get("missing", 5)` returns `None`; it should return the default, `5`.
""",
        ),
    ),
)

INIKIT = Family(
    package="inikit",
    module="ini",
    summary="a small INI parser",
    source='''"""A small INI parser."""


def parse(text):
    """{section: {key: value}}; keys before any section header go to "DEFAULT"."""
    data = {}
    section = "DEFAULT"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            data.setdefault(section, {})
            continue
        if "=" not in line:
            raise ValueError(f"bad line: {raw!r}")
        key, value = line.split("=", 1)
        data.setdefault(section, {})[key.strip()] = value.strip()
    return data


def get(data, section, key, default=None):
    return data.get(section, {}).get(key, default)


def get_bool(data, section, key, default=False):
    """1/true/yes/on (any case) are true; a missing key gives default."""
    value = get(data, section, key)
    if value is None:
        return default
    return value.lower() in ("1", "true", "yes", "on")
''',
    tests='''import pytest

from inikit.ini import get, get_bool, parse


def test_sections():
    data = parse("[server]\\nport = 80\\n")
    assert data == {"server": {"port": "80"}}


def test_get_default():
    assert get({}, "a", "b", "x") == "x"


def test_bad_line():
    with pytest.raises(ValueError):
        parse("[s]\\nnot a pair\\n")


def test_get_bool_true():
    assert get_bool(parse("debug=true"), "DEFAULT", "debug") is True
''',
    bugs=(
        Bug(
            name="semicolon-comments",
            kind="missing case",
            fixed='if not line or line.startswith(("#", ";")):',
            buggy='if not line or line.startswith("#"):',
            new_tests='''

def test_semicolon_comment():
    assert parse("; comment\\na = 1") == {"DEFAULT": {"a": "1"}}
''',
            statement="""Lines starting with ';' are not treated as comments

`parse("; comment\\na = 1")` raises `ValueError: bad line`. INI files use both `#` and `;` for
comments.
""",
        ),
        Bug(
            name="equals-in-value",
            kind="missing edge case",
            fixed='key, value = line.split("=", 1)',
            buggy='key, value = line.split("=")',
            new_tests='''

def test_value_with_equals_sign():
    assert parse("url = a=b") == {"DEFAULT": {"url": "a=b"}}
''',
            statement="""Values containing '=' crash the parser

`parse("url = a=b")` raises `ValueError: too many values to unpack`. Only the first `=` separates the
key from the value.
""",
        ),
        Bug(
            name="bool-default",
            kind="wrong default",
            fixed='''    if value is None:
        return default''',
            buggy='''    if value is None:
        return False''',
            new_tests='''

def test_get_bool_missing_uses_default():
    assert get_bool({}, "s", "k", default=True) is True
''',
            statement="""get_bool ignores default for a missing key

`get_bool({}, "s", "k", default=True)` returns `False`.
""",
        ),
        Bug(
            name="bool-words",
            kind="missing case",
            fixed='return value.lower() in ("1", "true", "yes", "on")',
            buggy='return value.lower() in ("1", "true")',
            new_tests='''

def test_get_bool_yes_on():
    data = parse("a = yes\\nb = On")
    assert get_bool(data, "DEFAULT", "a") is True
    assert get_bool(data, "DEFAULT", "b") is True
''',
            statement="""get_bool does not accept 'yes' and 'on'

The docstring lists 1/true/yes/on as true values, but `get_bool` returns `False` for `yes` and `On`.
""",
        ),
    ),
)

CALENDAR = Family(
    package="calendar_utils",
    module="dates",
    summary="calendar arithmetic",
    source='''"""Calendar arithmetic on datetime.date."""

import datetime


def is_leap(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    if not 1 <= month <= 12:
        raise ValueError("month must be in 1..12")
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def add_months(day, months):
    """The same day `months` later, clamped to the month's last day (Jan 31 + 1 month = Feb 28/29)."""
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    return datetime.date(year, month, min(day.day, days_in_month(year, month)))
''',
    tests='''import datetime

import pytest

from calendar_utils.dates import add_months, days_in_month, is_leap


def test_leap_years():
    assert is_leap(2024)
    assert not is_leap(2023)
    assert is_leap(2000)


def test_february():
    assert days_in_month(2024, 2) == 29


def test_bad_month():
    with pytest.raises(ValueError):
        days_in_month(2024, 13)


def test_add_one_month():
    assert add_months(datetime.date(2024, 1, 15), 1) == datetime.date(2024, 2, 15)
''',
    bugs=(
        Bug(
            name="leap-century",
            kind="missing case",
            fixed="return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)",
            buggy="return year % 4 == 0",
            new_tests='''

def test_century_years():
    assert not is_leap(1900)
    assert not is_leap(2100)
''',
            statement="""is_leap(1900) returns True

Century years are leap years only when divisible by 400: 1900 and 2100 are not leap years.
""",
        ),
        Bug(
            name="september",
            kind="wrong constant",
            fixed="return 30 if month in (4, 6, 9, 11) else 31",
            buggy="return 30 if month in (4, 6, 11) else 31",
            new_tests='''

def test_thirty_day_months():
    assert [days_in_month(2023, m) for m in (4, 6, 9, 11)] == [30, 30, 30, 30]
''',
            statement="""days_in_month(2023, 9) returns 31

September has 30 days.
""",
        ),
        Bug(
            name="month-end-clamp",
            kind="missing edge case",
            fixed="return datetime.date(year, month, min(day.day, days_in_month(year, month)))",
            buggy="return datetime.date(year, month, day.day)",
            new_tests='''

def test_add_month_clamps_to_month_end():
    assert add_months(datetime.date(2024, 1, 31), 1) == datetime.date(2024, 2, 29)
    assert add_months(datetime.date(2023, 3, 31), -1) == datetime.date(2023, 2, 28)
''',
            statement="""add_months crashes at the end of a month

`add_months(date(2024, 1, 31), 1)` raises `ValueError: day is out of range for month`. As documented,
it should clamp to the last day of the target month: `date(2024, 2, 29)`.
""",
        ),
    ),
)

NUMERALS = Family(
    package="numerals",
    module="roman",
    summary="Roman numerals",
    source='''"""Roman numerals (1..3999)."""

PAIRS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
         (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(number):
    if not 0 < number < 4000:
        raise ValueError("roman numerals cover 1..3999")
    out = []
    for value, letters in PAIRS:
        count, number = divmod(number, value)
        out.append(letters * count)
    return "".join(out)


def from_roman(text):
    """The value of a canonical numeral; ValueError for anything else."""
    total = 0
    for i, ch in enumerate(text):
        if ch not in VALUES:
            raise ValueError(f"not a roman digit: {ch!r}")
        value = VALUES[ch]
        if i + 1 < len(text) and VALUES.get(text[i + 1], 0) > value:
            total -= value
        else:
            total += value
    if not text or to_roman(total) != text:
        raise ValueError(f"not a canonical roman numeral: {text!r}")
    return total
''',
    tests='''import pytest

from numerals.roman import from_roman, to_roman


def test_small():
    assert to_roman(1) == "I"
    assert to_roman(3) == "III"


def test_year():
    assert to_roman(2023) == "MMXXIII"


def test_parse():
    assert from_roman("XII") == 12


def test_limits():
    with pytest.raises(ValueError):
        to_roman(4000)
    with pytest.raises(ValueError):
        from_roman("")
''',
    bugs=(
        Bug(
            name="subtractive-units",
            kind="wrong constant",
            fixed='(10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]',
            buggy='(10, "X"), (5, "V"), (1, "I")]',
            new_tests='''

def test_subtractive_units():
    assert to_roman(4) == "IV"
    assert to_roman(9) == "IX"
    assert to_roman(1994) == "MCMXCIV"
    assert from_roman("XIV") == 14
''',
            statement="""to_roman(4) returns 'IIII'

Roman numerals use subtractive notation for 4 and 9 (`IV`, `IX`), as the code already does for 40, 90,
400 and 900. `to_roman(1994)` should be `MCMXCIV` and `from_roman("XIV")` should be 14.
""",
        ),
        Bug(
            name="zero",
            kind="wrong operator",
            fixed="if not 0 < number < 4000:",
            buggy="if not 0 <= number < 4000:",
            new_tests='''

def test_zero_has_no_numeral():
    with pytest.raises(ValueError):
        to_roman(0)
''',
            statement="""to_roman(0) returns an empty string

There is no Roman numeral for zero; like 4000, it should raise `ValueError`.
""",
        ),
        Bug(
            name="non-canonical",
            kind="missing check",
            fixed="if not text or to_roman(total) != text:",
            buggy="if not text:",
            new_tests='''

def test_non_canonical_rejected():
    for text in ("IIII", "VX", "IC"):
        with pytest.raises(ValueError):
            from_roman(text)
''',
            statement="""from_roman accepts malformed numerals

`from_roman("IIII")` returns 4 and `from_roman("IC")` returns 99. The docstring says only canonical
numerals are accepted; these should raise `ValueError`.
""",
        ),
    ),
)

RINGBUF = Family(
    package="ringbuf",
    module="ring",
    summary="a fixed-size ring buffer",
    source='''"""A fixed-size FIFO that overwrites its oldest item when full."""


class RingBuffer:
    def __init__(self, size):
        if size < 1:
            raise ValueError("size must be >= 1")
        self._items = [None] * size
        self._start = 0
        self._count = 0

    def append(self, item):
        size = len(self._items)
        end = (self._start + self._count) % size
        self._items[end] = item
        if self._count == size:
            self._start = (self._start + 1) % size
        else:
            self._count += 1

    def pop(self):
        """Remove and return the oldest item."""
        if self._count == 0:
            raise IndexError("pop from empty RingBuffer")
        item = self._items[self._start]
        self._items[self._start] = None
        self._start = (self._start + 1) % len(self._items)
        self._count -= 1
        return item

    def peek(self):
        """The oldest item, left in place."""
        if self._count == 0:
            raise IndexError("peek at empty RingBuffer")
        return self._items[self._start]

    def __len__(self):
        return self._count

    def to_list(self):
        return [self._items[(self._start + i) % len(self._items)] for i in range(self._count)]
''',
    tests='''import pytest

from ringbuf.ring import RingBuffer


def test_fifo():
    ring = RingBuffer(3)
    ring.append(1)
    ring.append(2)
    assert ring.pop() == 1
    assert len(ring) == 1


def test_pop_empty():
    with pytest.raises(IndexError):
        RingBuffer(1).pop()


def test_size_must_be_positive():
    with pytest.raises(ValueError):
        RingBuffer(0)
''',
    bugs=(
        Bug(
            name="wraparound",
            kind="missing modulo",
            fixed="end = (self._start + self._count) % size",
            buggy="end = self._start + self._count",
            new_tests='''

def test_overwrite_oldest():
    ring = RingBuffer(3)
    for item in range(1, 5):
        ring.append(item)
    assert ring.to_list() == [2, 3, 4]
''',
            statement="""RingBuffer.append raises IndexError when the buffer is full

Appending a fourth item to `RingBuffer(3)` raises `IndexError: list assignment index out of range`. A
full buffer should overwrite its oldest item: after appending 1..4, `to_list()` is `[2, 3, 4]`.
""",
        ),
        Bug(
            name="count-overflow",
            kind="missing branch",
            fixed='''        else:
            self._count += 1''',
            buggy='''        self._count += 1''',
            new_tests='''

def test_length_never_exceeds_size():
    ring = RingBuffer(3)
    for item in range(5):
        ring.append(item)
    assert len(ring) == 3
    assert ring.to_list() == [2, 3, 4]
''',
            statement="""len(RingBuffer) grows past its size

After five appends to `RingBuffer(3)`, `len()` is 5 and `to_list()` repeats items.
""",
        ),
        Bug(
            name="peek-empty",
            kind="missing edge case",
            fixed='''        if self._count == 0:
            raise IndexError("peek at empty RingBuffer")
        return self._items[self._start]''',
            buggy='''        return self._items[self._start]''',
            new_tests='''

def test_peek():
    ring = RingBuffer(2)
    with pytest.raises(IndexError):
        ring.peek()
    ring.append("x")
    assert ring.peek() == "x"
''',
            statement="""RingBuffer.peek() on an empty buffer returns None

`pop()` raises `IndexError` on an empty buffer, but `peek()` silently returns `None`, which cannot be
told apart from a stored `None`. It should raise `IndexError` too.
""",
        ),
    ),
)

CSVLITE = Family(
    package="csvlite",
    module="reader",
    summary="a tiny CSV reader",
    source='''"""A tiny CSV reader."""


def split_line(line, sep=","):
    """Fields of one line; double-quoted fields may hold the separator, and "" stands for a quote."""
    fields, current, quoted, i = [], [], False, 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"':
                if i + 1 < len(line) and line[i + 1] == '"':
                    current.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                current.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == sep:
            fields.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    fields.append("".join(current))
    return fields


def read_rows(text, sep=","):
    """Rows of fields; blank lines are skipped."""
    return [split_line(line, sep) for line in text.splitlines() if line.strip()]


def read_dicts(text, sep=",", missing=""):
    """Rows as dicts keyed by the header row; short rows are filled with `missing`."""
    rows = read_rows(text, sep)
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    return [{name: (row[i] if i < len(row) else missing) for i, name in enumerate(header)} for row in body]
''',
    tests='''from csvlite.reader import read_dicts, read_rows, split_line


def test_split_plain():
    assert split_line("a,b,c") == ["a", "b", "c"]


def test_split_quoted_separator():
    assert split_line('"x,y",z') == ["x,y", "z"]


def test_rows():
    assert read_rows("1,2\\n3,4") == [["1", "2"], ["3", "4"]]


def test_dicts():
    assert read_dicts("a,b\\n1,2") == [{"a": "1", "b": "2"}]
''',
    bugs=(
        Bug(
            name="escaped-quote",
            kind="missing case",
            fixed='''            if ch == '"':
                if i + 1 < len(line) and line[i + 1] == '"':
                    current.append('"')
                    i += 1
                else:
                    quoted = False''',
            buggy='''            if ch == '"':
                quoted = False''',
            new_tests='''

def test_doubled_quote_inside_quotes():
    assert split_line('"a ""b""",c') == ['a "b"', "c"]
''',
            statement='''Doubled quotes inside a quoted field are lost

`split_line('"a ""b""",c')` returns `['a b', 'c']`; in CSV `""` inside a quoted field stands for one
quote, so the result should be `['a "b"', 'c']`.
''',
        ),
        Bug(
            name="blank-lines",
            kind="missing filter",
            fixed="return [split_line(line, sep) for line in text.splitlines() if line.strip()]",
            buggy="return [split_line(line, sep) for line in text.splitlines()]",
            new_tests='''

def test_blank_lines_skipped():
    assert read_rows("a,b\\n\\n c,d\\n") == [["a", "b"], [" c", "d"]]
''',
            statement="""read_rows returns a row for every blank line

`read_rows("a,b\\n\\nc,d")` contains a `['']` row; blank lines should be skipped as documented.
""",
        ),
        Bug(
            name="missing-fill",
            kind="wrong default",
            fixed="{name: (row[i] if i < len(row) else missing)",
            buggy="{name: (row[i] if i < len(row) else None)",
            new_tests='''

def test_short_rows_filled():
    assert read_dicts("a,b\\n1", missing="-") == [{"a": "1", "b": "-"}]
    assert read_dicts("a,b\\n1") == [{"a": "1", "b": ""}]
''',
            statement="""read_dicts fills short rows with None instead of `missing`

`read_dicts("a,b\\n1", missing="-")` gives `{'a': '1', 'b': None}`; expected `{'a': '1', 'b': '-'}`
(and `''` by default).
""",
        ),
    ),
)

MONEY = Family(
    package="money",
    module="amounts",
    summary="money amounts in cents",
    source='''"""Money amounts handled as integer cents."""

from decimal import ROUND_HALF_UP, Decimal


def to_cents(amount):
    """Round a decimal amount (str, int or Decimal) half-up to whole cents."""
    return int((Decimal(str(amount)) * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def format_cents(cents, symbol="$"):
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{symbol}{whole:,}.{frac:02d}"


def split(cents, parts):
    """Split into `parts` shares that differ by at most one cent and sum to the total."""
    if parts <= 0:
        raise ValueError("parts must be positive")
    base, extra = divmod(cents, parts)
    return [base + 1 if i < extra else base for i in range(parts)]
''',
    tests='''import pytest

from money.amounts import format_cents, split, to_cents


def test_to_cents():
    assert to_cents("1.5") == 150
    assert to_cents(2) == 200


def test_format_thousands():
    assert format_cents(123456) == "$1,234.56"


def test_even_split():
    assert split(90, 3) == [30, 30, 30]


def test_split_needs_parts():
    with pytest.raises(ValueError):
        split(10, 0)
''',
    bugs=(
        Bug(
            name="half-up",
            kind="wrong rounding mode",
            fixed='.quantize(Decimal("1"), rounding=ROUND_HALF_UP))',
            buggy='.quantize(Decimal("1")))',
            new_tests='''

def test_rounds_half_up():
    assert to_cents("0.125") == 13
    assert to_cents("2.665") == 267
''',
            statement="""to_cents rounds half to even

`to_cents("0.125")` returns 12. The docstring (and our invoices) say half-up: 13.
""",
        ),
        Bug(
            name="negative-sign",
            kind="wrong order",
            fixed='return f"{sign}{symbol}{whole:,}.{frac:02d}"',
            buggy='return f"{symbol}{sign}{whole:,}.{frac:02d}"',
            new_tests='''

def test_negative_format():
    assert format_cents(-150) == "-$1.50"
''',
            statement="""format_cents puts the minus sign after the currency symbol

`format_cents(-150)` returns `"$-1.50"`; expected `"-$1.50"`.
""",
        ),
        Bug(
            name="split-remainder",
            kind="missing step",
            fixed="return [base + 1 if i < extra else base for i in range(parts)]",
            buggy="return [base for i in range(parts)]",
            new_tests='''

def test_uneven_split_keeps_every_cent():
    assert split(100, 3) == [34, 33, 33]
    assert sum(split(7, 4)) == 7
''',
            statement="""split() loses cents

`split(100, 3)` returns `[33, 33, 33]`, which sums to 99. The shares must sum to the total and differ by
at most one cent: `[34, 33, 33]`.
""",
        ),
    ),
)

GRAPHS = Family(
    package="graphs",
    module="paths",
    summary="graph algorithms on adjacency dicts",
    source='''"""Graph algorithms on adjacency dicts {node: [neighbours]}."""

from collections import deque


def shortest_path(graph, start, goal):
    """A fewest-edges path from start to goal as a list of nodes, or None."""
    if start == goal:
        return [start]
    previous = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for neighbour in graph.get(node, ()):
            if neighbour in previous:
                continue
            previous[neighbour] = node
            if neighbour == goal:
                path = [goal]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return path[::-1]
            queue.append(neighbour)
    return None


def topological_order(graph):
    """Nodes ordered so every edge u->v has u first (ties by name); ValueError on a cycle."""
    indegree = {node: 0 for node in graph}
    for targets in graph.values():
        for target in targets:
            indegree[target] = indegree.get(target, 0) + 1
    ready = sorted(node for node, degree in indegree.items() if degree == 0)
    order = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for target in sorted(graph.get(node, ())):
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    if len(order) != len(indegree):
        raise ValueError("graph has a cycle")
    return order


def components(graph):
    """Connected components of an undirected graph, each sorted; isolated nodes are components too."""
    seen, result = set(), []
    for node in sorted(graph):
        if node in seen:
            continue
        stack, part = [node], []
        seen.add(node)
        while stack:
            current = stack.pop()
            part.append(current)
            for neighbour in graph.get(current, ()):
                if neighbour not in seen:
                    seen.add(neighbour)
                    stack.append(neighbour)
        result.append(sorted(part))
    return result
''',
    tests='''from graphs.paths import components, shortest_path, topological_order

GRAPH = {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}


def test_shortest_path():
    assert shortest_path(GRAPH, "a", "d") == ["a", "b", "d"]


def test_unreachable():
    assert shortest_path(GRAPH, "d", "a") is None


def test_topological_order():
    assert topological_order(GRAPH) == ["a", "b", "c", "d"]


def test_two_components():
    graph = {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"]}
    assert components(graph) == [["a", "b"], ["c", "d"]]
''',
    bugs=(
        Bug(
            name="path-to-self",
            kind="missing edge case",
            fixed='''    if start == goal:
        return [start]
    previous''',
            buggy='''    previous''',
            new_tests='''

def test_path_to_itself():
    assert shortest_path(GRAPH, "a", "a") == ["a"]
''',
            statement="""shortest_path(g, x, x) returns None

The path from a node to itself is `[x]`, but `shortest_path(GRAPH, "a", "a")` returns `None`.
""",
        ),
        Bug(
            name="cycle-check",
            kind="missing check",
            fixed='''    if len(order) != len(indegree):
        raise ValueError("graph has a cycle")
    return order''',
            buggy='''    return order''',
            new_tests='''

def test_cycle_is_an_error():
    import pytest

    with pytest.raises(ValueError):
        topological_order({"a": ["b"], "b": ["a"], "c": []})
''',
            statement="""topological_order silently drops nodes on a cycle

`topological_order({"a": ["b"], "b": ["a"], "c": []})` returns `["c"]`. A graph with a cycle has no
topological order; the function should raise `ValueError` as documented.
""",
        ),
        Bug(
            name="isolated-nodes",
            kind="wrong condition",
            fixed='''        if node in seen:
            continue
        stack, part''',
            buggy='''        if node in seen or not graph.get(node):
            continue
        stack, part''',
            new_tests='''

def test_isolated_node_is_a_component():
    graph = {"a": ["b"], "b": ["a"], "c": []}
    assert components(graph) == [["a", "b"], ["c"]]
''',
            statement="""components() drops isolated nodes

`components({"a": ["b"], "b": ["a"], "c": []})` returns `[["a", "b"]]`; a node without edges is its own
component: expected `[["a", "b"], ["c"]]`.
""",
        ),
    ),
)

FAMILIES: tuple[Family, ...] = (TEXTKIT, STATKIT, SPANS, PAGER, LRU, INIKIT, CALENDAR, NUMERALS, RINGBUF, CSVLITE, MONEY, GRAPHS)
