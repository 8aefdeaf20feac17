"""A reverse Polish notation calculator."""

import operator

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def evaluate(expression):
    stack = []
    for token in expression.split():
        if token in OPS:
            if len(stack) < 2:
                raise ValueError(f"not enough operands for {token!r}")
            right, left = stack.pop(), stack.pop()
            stack.append(OPS[token](left, right))
            continue
        try:
            stack.append(float(token))
        except ValueError:
            raise ValueError(f"unknown token {token!r}") from None
    if len(stack) != 1:
        raise ValueError("expression must leave exactly one value")
    return float(stack[0])
