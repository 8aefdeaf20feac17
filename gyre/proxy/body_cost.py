"""What parsing a request body would cost the host, estimated before parsing it.

``json.loads`` builds a Python object for every JSON value: a body of ``[],[],...`` takes ~20 times its
size in memory and seconds of CPU with the GIL held, during which no other execution's call is served.
`check` estimates the parse from counts made in C (quotes, brackets, separators, the widest character)
and refuses a body whose estimate exceeds ``ratio`` times its size, unless the estimate is under
``floor_bytes`` (small bodies are parsed whatever their shape: at most a few MiB). Requests that agents
send (long strings: prompts, files, tool output; tool schemas) stay well under four times their size.

The estimate, per body: the raw bytes, the text json decodes them into, the strings made from it (both at
the body's widest character: 1, 2 or 4 bytes, as CPython stores text), and a fixed size per container and
per other value. Strings are counted from quotes first, so a body made of many tiny strings is refused
before anything else; brackets and separators are then counted over the whole body, and only when that
upper bound is over the budget and the body has strings does one regex pass count what lies outside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gyre.proxy.errors import ProxyError

CONTAINER_BYTES = 64  # a list or dict and its slot in its parent
VALUE_BYTES = 40  # a number, literal or short string and its slot
STRING_BYTES = 56  # the smallest string object
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
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


def char_width(raw: bytes | bytearray) -> int:
    """Bytes per character of the widest text in ``raw`` as CPython stores it (byte scans in C)."""
    escaped = b"\\u" in raw
    if raw.translate(None, _BELOW_ASTRAL) or (escaped and _ESCAPED_SURROGATE.search(raw)):
        return 4
    if raw.translate(None, _BELOW_WIDE) or (escaped and _ESCAPED_WIDE.search(raw)):
        return 2
    return 1


def estimate(raw: bytes | bytearray, budget: int | None = None) -> ParseCost:
    """The estimated peak memory of parsing ``raw``. Counting stops once the estimate is surely over
    ``budget`` (strings alone, or every separator counted as if outside strings with no strings at all)."""
    size = len(raw)
    text = size * char_width(raw)
    strings = raw.count(b'"') // 2
    partial = size + 2 * text + strings * STRING_BYTES
    if budget is not None and partial > budget:
        return ParseCost(size, partial, strings)
    # Counted over the whole body, separators inside strings included: an upper bound, exact without strings.
    containers = raw.count(b"[") + raw.count(b"{")
    values = raw.count(b",") + raw.count(b":") + 1
    upper = partial + containers * CONTAINER_BYTES + values * VALUE_BYTES
    if strings and (budget is None or upper > budget):
        skeleton = _STRING.sub(b'""', raw)  # one copy of what lies outside strings
        containers = skeleton.count(b"[") + skeleton.count(b"{")
        values = skeleton.count(b",") + skeleton.count(b":") + 1
    return ParseCost(size, partial + containers * CONTAINER_BYTES + values * VALUE_BYTES, strings, containers, values)


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
