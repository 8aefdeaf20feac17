import pytest

from rpn import evaluate


def test_simple():
    assert evaluate("3 4 +") == 7


def test_nested():
    assert evaluate("3 4 + 2 *") == 14


def test_order_of_operands():
    assert evaluate("10 2 -") == 8
    assert evaluate("10 4 /") == 2.5


def test_negative_and_decimal():
    assert evaluate("-3 1.5 *") == -4.5


def test_result_is_float():
    assert isinstance(evaluate("2 2 +"), float)


def test_unknown_token():
    with pytest.raises(ValueError):
        evaluate("1 2 ^")


def test_missing_operand():
    with pytest.raises(ValueError):
        evaluate("1 +")


def test_leftover_values():
    with pytest.raises(ValueError):
        evaluate("1 2")
    with pytest.raises(ValueError):
        evaluate("")


def test_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        evaluate("1 0 /")
