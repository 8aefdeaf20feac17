"""Run-length encoding."""


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
