"""Text histograms."""


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
    return "\n".join(lines)
