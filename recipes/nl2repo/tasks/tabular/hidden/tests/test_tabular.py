import pytest

from tabular import render


def test_plain():
    assert render([["a", 1], ["bb", 22]]) == "a  | 1\nbb | 22"


def test_header():
    assert render([[1, 2]], header=["x", "yy"]) == "x | yy\n--+---\n1 | 2"


def test_align():
    assert render([["a", 1], ["bbb", 100]], align="rr") == "  a |   1\nbbb | 100"
    assert render([["a"], ["abc"]], align="c") == " a\nabc"


def test_empty_table():
    assert render([]) == ""


def test_errors():
    with pytest.raises(ValueError):
        render([[1, 2], [3]])
    with pytest.raises(ValueError):
        render([[1]], header=["a", "b"])
    with pytest.raises(ValueError):
        render([[1]], align="x")
