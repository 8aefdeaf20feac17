import pytest

from scheduler import Conflict, Room, free_slots, to_clock, to_minutes


def test_clock_helpers():
    assert to_minutes("09:30") == 570
    assert to_clock(570) == "09:30"
    with pytest.raises(ValueError):
        to_minutes("9h30")


def test_book_and_sort():
    room = Room("r")
    room.book(600, 660, "b")
    room.book(540, 600, "a")
    assert room.meetings() == [(540, 600, "a"), (600, 660, "b")]


def test_conflict():
    room = Room("r")
    room.book(540, 600, "a")
    with pytest.raises(Conflict):
        room.book(570, 630, "b")


def test_bad_times():
    with pytest.raises(ValueError):
        Room("r").book(600, 600, "x")


def test_cancel():
    room = Room("r")
    room.book(0, 10, "x")
    assert room.cancel("x") and not room.cancel("x")
    assert room.meetings() == []


def test_free_slots():
    room = Room("r")
    room.book(540, 600, "a")
    room.book(630, 700, "b")
    assert free_slots(room, 480, 720) == [(480, 540), (600, 630), (700, 720)]
    assert free_slots(room, 480, 720, minimum=45) == [(480, 540)]
