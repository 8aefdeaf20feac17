"""A tiny JSON path lookup."""

import re

_STEP = re.compile(r"([^.\[\]]*)((?:\[-?\d+\])*)$")


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
        steps.extend(int(x) for x in re.findall(r"-?\d+", match.group(2)))
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
