"""An arithmetic expression evaluator (recursive descent, no eval)."""

import re

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|(.))")


def tokenize(expression):
    tokens = []
    for number, other in _TOKEN.findall(expression):
        if number:
            tokens.append(number)
        elif other.strip():
            if other not in "+-*/()":
                raise ValueError(f"unexpected character {other!r}")
            tokens.append(other)
    return tokens


class _Parser:
    def __init__(self, tokens):
        self.tokens, self.pos = tokens, 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self):
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end of expression")
        self.pos += 1
        return token

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self):
        value = self.factor()
        while self.peek() in ("*", "/"):
            if self.take() == "*":
                value *= self.factor()
            else:
                value /= self.factor()
        return value

    def factor(self):
        token = self.take()
        if token == "-":
            return -self.factor()
        if token == "(":
            value = self.expr()
            if self.take() != ")":
                raise ValueError("missing )")
            return value
        try:
            return float(token)
        except ValueError:
            raise ValueError(f"unexpected token {token!r}") from None


def evaluate(expression):
    tokens = tokenize(expression)
    if not tokens:
        raise ValueError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.peek() is not None:
        raise ValueError(f"unexpected token {parser.peek()!r}")
    return float(value)
