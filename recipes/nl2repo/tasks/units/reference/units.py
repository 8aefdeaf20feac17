"""Length unit conversion."""

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
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*", text)
    if not match:
        raise ValueError(f"not a length: {text!r}")
    return float(match.group(1)), _unit(match.group(2))


def to_feet_inches(meters):
    inches = round(meters / METERS["in"])
    feet, rest = divmod(inches, 12)
    return f"{feet}' {rest}\""
