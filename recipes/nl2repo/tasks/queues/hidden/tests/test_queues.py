import pytest

from queues import Queue


def test_fifo():
    q = Queue()
    for i in range(3):
        q.push(i)
    assert [q.pop(), q.pop(), q.pop()] == [0, 1, 2]


def test_initial_items():
    assert Queue("ab").pop() == "a"


def test_peek():
    q = Queue([1, 2])
    assert q.peek() == 1
    assert len(q) == 2


def test_empty_errors():
    with pytest.raises(IndexError):
        Queue().pop()
    with pytest.raises(IndexError):
        Queue().peek()


def test_bool():
    assert not Queue()
    assert Queue([0])


def test_interleaved_iteration():
    q = Queue([1, 2])
    q.pop()
    q.push(3)
    q.push(4)
    assert list(q) == [2, 3, 4]
    assert len(q) == 3
