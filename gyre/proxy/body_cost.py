"""What parsing a request body would cost the host, estimated before parsing it.

``json.loads`` builds a Python object for every JSON value: a body of ``[],[],...`` takes ~20 times its
size in memory and seconds of CPU with the GIL held, during which no other execution's call is served.
`check` estimates the parse from counts made in C (quotes, brackets, separators, the widest character),
each over at most ``SCAN_BYTES`` at a time so that estimating a large body never holds the GIL for long,
and refuses a body whose estimate exceeds ``ratio`` times its size, unless the estimate is under
``floor_bytes`` (small bodies are parsed whatever their shape: at most a few MiB). Requests that agents
send (long strings: prompts, files, tool output; tool schemas) stay well under four times their size.

The estimate, per body: the raw bytes, the text json decodes them into, the strings made from it (both at
the body's widest character: 1, 2 or 4 bytes, as CPython stores text), and a fixed size per container and
per other value. Strings are counted from quotes first, so a body made of many tiny strings is refused
before anything else; brackets and separators are then counted over the whole body, and only when that
upper bound is over the budget and the body has strings does a string-aware scan count what lies outside them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gyre.proxy.errors import ProxyError

CONTAINER_BYTES = 64  # a list or dict and its slot in its parent
VALUE_BYTES = 40  # a number, literal or short string and its slot
STRING_BYTES = 56  # the smallest string object
# Every scan covers at most this many bytes, so the GIL is free between scans (about a millisecond each):
# a 32 MiB body scanned in one call would hold it ~20 ms per scan, and a call of another execution
# waits out one scan at each of its thread hand-offs.
SCAN_BYTES = 1 << 20
PAUSE_S = 0.0002
STRING_SCAN_BYTES = 1 << 16  # the string-aware scan's chunk: its temporaries are ~20 bytes per byte
_ESCAPE = re.compile(rb"\\u")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89abAB]")  # half of a character above U+FFFF
_ESCAPED_WIDE = re.compile(rb"\\u(?!00)")  # a character above U+00FF
_BELOW_ASTRAL = bytes(range(0xF0))  # UTF-8 lead bytes of characters above U+FFFF are 0xF0-0xF4
_BELOW_WIDE = bytes(range(0xC4))  # ... of characters above U+00FF, 0xC4 and up


@dataclass(frozen=True)
class ParseCost:
    body_bytes: int
    estimate_bytes: int
    strings: int = 0
    containers: int = 0
    values: int = 0

    @property
    def ratio(self) -> float:
        return self.estimate_bytes / max(1, self.body_bytes)


def _spans(size: int, step: int) -> Iterator[int]:
    """The starts of ``step``-byte scans of a ``size``-byte body, pausing between scans: a thread that waits
    for the GIL (the event loop, an engine's thread in this process) gets it at once instead of after
    the interpreter's switch interval (5 ms), which it would wait again at each of its own C calls."""
    for start in range(0, size, step):
        if start:
            time.sleep(PAUSE_S)
        yield start


def _count(raw: bytes | bytearray, needle: bytes) -> int:
    return sum(raw.count(needle, start, start + SCAN_BYTES) for start in _spans(len(raw), SCAN_BYTES))


def _has_byte_outside(raw: bytes | bytearray, below: bytes) -> bool:
    """Whether ``raw`` has a byte not in ``below``."""
    return any(raw[start:start + SCAN_BYTES].translate(None, below) for start in _spans(len(raw), SCAN_BYTES))


def _search(raw: bytes | bytearray, pattern: re.Pattern[bytes], overlap: int) -> bool:
    """Whether ``pattern`` (at most ``overlap`` + 1 bytes long, lookahead included) occurs in ``raw``. A
    match starting past a scan's own bytes is left to the next scan, which sees its whole context."""
    for start in _spans(len(raw), SCAN_BYTES):
        found = pattern.search(raw, start, start + SCAN_BYTES + overlap)
        if found and found.start() < start + SCAN_BYTES:
            return True
    return False


def char_width(raw: bytes | bytearray) -> int:
    """Bytes per character of the widest text in ``raw`` as CPython stores it (byte scans in C)."""
    escaped = _search(raw, _ESCAPE, 1)
    if _has_byte_outside(raw, _BELOW_ASTRAL) or (escaped and _search(raw, _ESCAPED_SURROGATE, 3)):
        return 4
    if _has_byte_outside(raw, _BELOW_WIDE) or (escaped and _search(raw, _ESCAPED_WIDE, 3)):
        return 2
    return 1


def outside_strings(raw: bytes | bytearray) -> tuple[int, int]:
    """(arrays and objects, other values) of ``raw`` counted outside its JSON strings.

    A vectorised scan, ``STRING_SCAN_BYTES`` at a time, carrying two facts across chunks: whether the
    chunk starts inside a string, and how many backslashes ended the last one. A quote is escaped when an
    odd run of backslashes precedes it; every unescaped quote flips inside/outside.
    """
    data = np.frombuffer(raw, dtype=np.uint8)
    positions = np.arange(STRING_SCAN_BYTES, dtype=np.int32)
    inside, run = 0, 0
    containers = values = 0
    for start in _spans(len(data), STRING_SCAN_BYTES):
        chunk = data[start:start + STRING_SCAN_BYTES]
        index = positions[:len(chunk)]
        backslash = chunk == ord("\\")
        # Where a run of backslashes ends at i, i - (last other byte at or before i) is its length.
        last_other = np.maximum.accumulate(np.where(backslash, np.int32(-1 - run), index))
        odd_run_ends = backslash & ((index - last_other) & 1 == 1)
        escaped = np.empty_like(backslash)
        escaped[0] = run & 1
        escaped[1:] = odd_run_ends[:-1]
        quote = (chunk == ord('"')) & ~escaped
        flips = np.cumsum(quote, dtype=np.uint8)  # wraps at 256: the parity is what counts
        outside = ((flips - quote) & 1) == inside
        containers += int(np.count_nonzero(((chunk == ord("[")) | (chunk == ord("{"))) & outside))
        values += int(np.count_nonzero(((chunk == ord(",")) | (chunk == ord(":"))) & outside))
        inside ^= int(flips[-1]) & 1
        run = int(index[-1] - last_other[-1]) if backslash[-1] else 0
    return containers, values


def estimate(raw: bytes | bytearray, budget: int | None = None) -> ParseCost:
    """The estimated peak memory of parsing ``raw``. Counting stops once the estimate is surely over
    ``budget`` (strings alone, or every separator counted as if outside strings with no strings at all)."""
    size = len(raw)
    text = size * char_width(raw)
    strings = _count(raw, b'"') // 2
    partial = size + 2 * text + strings * STRING_BYTES
    if budget is not None and partial > budget:
        return ParseCost(size, partial, strings)
    # Counted over the whole body, separators inside strings included: an upper bound, exact without strings.
    containers = _count(raw, b"[") + _count(raw, b"{")
    values = _count(raw, b",") + _count(raw, b":")
    upper = partial + containers * CONTAINER_BYTES + (values + 1) * VALUE_BYTES
    if strings and (budget is None or upper > budget):
        containers, values = outside_strings(raw)
    return ParseCost(size, partial + containers * CONTAINER_BYTES + (values + 1) * VALUE_BYTES, strings, containers, values + 1)


def check(raw: bytes | bytearray, ratio: float, floor_bytes: int) -> ParseCost:
    """Refuse (413) a body whose parse would cost more than ``ratio`` times its size and ``floor_bytes``."""
    budget = max(int(ratio * len(raw)), floor_bytes)
    cost = estimate(raw, budget)
    if cost.estimate_bytes > budget:
        raise ProxyError(
            "too_large",
            f"request body of {len(raw)} bytes would take ~{cost.estimate_bytes >> 20} MiB to parse "
            f"({cost.ratio:.0f}x its size: {cost.strings} strings, {cost.containers} arrays/objects, "
            f"{cost.values} other values); the limit is {ratio:g}x (proxy.max_parse_memory_ratio) "
            f"above {floor_bytes >> 20} MiB (proxy.parse_memory_floor_mb)",
        )
    return cost
