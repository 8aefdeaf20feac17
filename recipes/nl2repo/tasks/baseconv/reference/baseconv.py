"""Number base conversion."""

DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _check(base):
    if not 2 <= base <= 36:
        raise ValueError("base must be in 2..36")


def to_base(n, base):
    _check(base)
    if n == 0:
        return "0"
    sign, n = ("-", -n) if n < 0 else ("", n)
    out = []
    while n:
        n, r = divmod(n, base)
        out.append(DIGITS[r])
    return sign + "".join(reversed(out))


def from_base(text, base):
    _check(base)
    body = text[1:] if text.startswith("-") else text
    if not body:
        raise ValueError("empty number")
    value = 0
    for ch in body.lower():
        digit = DIGITS.find(ch)
        if digit < 0 or digit >= base:
            raise ValueError(f"invalid digit {ch!r} for base {base}")
        value = value * base + digit
    return -value if text.startswith("-") else value
