"""Human-readable durations."""

import re

UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_PART = re.compile(r"(\d+)\s*([a-zA-Z])")


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
