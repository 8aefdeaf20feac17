"""Configurable FizzBuzz."""

DEFAULT_RULES = ((3, "Fizz"), (5, "Buzz"))


def fizzbuzz(n, rules=DEFAULT_RULES):
    if any(divisor <= 0 for divisor, _ in rules):
        raise ValueError("divisors must be positive")
    out = []
    for i in range(1, n + 1):
        word = "".join(text for divisor, text in rules if i % divisor == 0)
        out.append(word or str(i))
    return out


def count_words(n, rules=DEFAULT_RULES):
    counts = {}
    for item in fizzbuzz(n, rules):
        if not item.isdigit():
            counts[item] = counts.get(item, 0) + 1
    return counts
