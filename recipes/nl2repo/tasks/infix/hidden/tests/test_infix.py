import pytest

from infix import evaluate, tokenize


def test_tokenize():
    assert tokenize("2*(3+4)") == ["2", "*", "(", "3", "+", "4", ")"]
    assert tokenize(" 1.5 - 2 ") == ["1.5", "-", "2"]


def test_precedence():
    assert evaluate("2 + 3 * 4") == 14


def test_parentheses():
    assert evaluate("(2 + 3) * 4") == 20


def test_left_associative():
    assert evaluate("10 - 4 - 3") == 3
    assert evaluate("16 / 4 / 2") == 2


def test_unary_minus():
    assert evaluate("-3 * -(2 + 1)") == 9


def test_float_result():
    assert evaluate("7 / 2") == 3.5
    assert isinstance(evaluate("1 + 1"), float)


@pytest.mark.parametrize("bad", ["", "(1 + 2", "1 + * 2", "2 $ 3", "1 2"])
def test_malformed(bad):
    with pytest.raises(ValueError):
        evaluate(bad)


def test_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        evaluate("1 / (2 - 2)")
