import pytest

from histogram import bins, render


def test_bins():
    assert bins([1, 2, 3, 4], 2) == [2, 2]
    assert bins([0, 10], 5) == [1, 0, 0, 0, 1]


def test_bins_constant():
    assert bins([5, 5, 5], 3) == [3, 0, 0]


def test_bins_errors():
    with pytest.raises(ValueError):
        bins([], 3)
    with pytest.raises(ValueError):
        bins([1], 0)


def test_render():
    assert render({"a": 2, "bbb": 4}, width=4) == "a   ## 2\nbbb #### 4"


def test_render_empty_and_zero():
    assert render({}) == ""
    assert render({"x": 0}, width=3) == "x  0"


def test_render_negative():
    with pytest.raises(ValueError):
        render({"x": -1})
