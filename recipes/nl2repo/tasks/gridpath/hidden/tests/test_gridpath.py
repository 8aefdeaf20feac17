import pytest

from gridpath import find, neighbours, shortest, solve

MAZE = [
    "S.#.",
    ".##.",
    "...G",
]


def test_find():
    assert find(MAZE, "G") == (2, 3)
    with pytest.raises(ValueError):
        find(MAZE, "X")


def test_neighbours_order_and_walls():
    assert neighbours(MAZE, (0, 0)) == [(1, 0), (0, 1)]
    assert neighbours(MAZE, (2, 1)) == [(2, 0), (2, 2)]


def test_solve():
    assert solve(MAZE) == 5


def test_unreachable():
    assert shortest(["S#G"], (0, 0), (0, 2)) == -1


def test_same_cell():
    assert shortest(MAZE, (0, 0), (0, 0)) == 0
