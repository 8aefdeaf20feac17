import pytest

from matrix import add, determinant, identity, multiply, shape, transpose


def test_shape():
    assert shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)


def test_ragged():
    with pytest.raises(ValueError):
        shape([[1, 2], [3]])


def test_identity():
    assert identity(2) == [[1, 0], [0, 1]]


def test_transpose():
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]


def test_add():
    assert add([[1, 2]], [[3, 4]]) == [[4, 6]]
    with pytest.raises(ValueError):
        add([[1]], [[1, 2]])


def test_multiply():
    assert multiply([[1, 2], [3, 4]], [[5], [6]]) == [[17], [39]]
    with pytest.raises(ValueError):
        multiply([[1, 2]], [[1, 2]])


def test_multiply_identity():
    m = [[2, 3], [4, 5]]
    assert multiply(m, identity(2)) == m


def test_determinant():
    assert determinant([[7]]) == 7
    assert determinant([[1, 2], [3, 4]]) == -2
    assert determinant([[2, 0, 1], [1, 3, 2], [1, 1, 2]]) == 6


def test_determinant_square_only():
    with pytest.raises(ValueError):
        determinant([[1, 2]])
