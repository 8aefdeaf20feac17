"""Check digit algorithms."""


def _clean(text):
    return text.replace(" ", "").replace("-", "")


def _luhn_sum(digits):
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total


def luhn_valid(number):
    digits = _clean(number)
    if len(digits) < 2 or not digits.isdigit():
        return False
    return _luhn_sum(digits) % 10 == 0


def luhn_digit(partial):
    digits = _clean(partial)
    for d in "0123456789":
        if _luhn_sum(digits + d) % 10 == 0:
            return d
    raise ValueError("no check digit")


def isbn10_valid(isbn):
    chars = _clean(isbn).upper()
    if len(chars) != 10 or not chars[:9].isdigit() or not (chars[9].isdigit() or chars[9] == "X"):
        return False
    values = [int(c) for c in chars[:9]] + [10 if chars[9] == "X" else int(chars[9])]
    return sum((10 - i) * v for i, v in enumerate(values)) % 11 == 0


def isbn13_valid(isbn):
    chars = _clean(isbn)
    if len(chars) != 13 or not chars.isdigit():
        return False
    return sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(chars)) % 10 == 0
