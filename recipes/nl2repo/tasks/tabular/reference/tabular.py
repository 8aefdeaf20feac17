"""Plain-text tables."""


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
    return "\n".join(lines)
