"""Temperature conversion."""

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
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([cfkCFK])\s*", text)
    if not match:
        raise ValueError(f"not a temperature: {text!r}")
    return float(match.group(1)), match.group(2).upper()
