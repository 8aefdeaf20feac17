"""A meeting-room scheduler."""

import re


class Conflict(Exception):
    pass


def to_minutes(text):
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", text)
    if not match or int(match.group(1)) > 24 or int(match.group(2)) > 59:
        raise ValueError(f"bad time {text!r}")
    total = int(match.group(1)) * 60 + int(match.group(2))
    if total > 1440:
        raise ValueError(f"bad time {text!r}")
    return total


def to_clock(minutes):
    if not 0 <= minutes <= 1440:
        raise ValueError("minutes out of range")
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


class Room:
    def __init__(self, name):
        self.name = name
        self._meetings = []

    def book(self, start, end, title):
        if not 0 <= start < end <= 1440:
            raise ValueError("bad meeting times")
        for s, e, t in self._meetings:
            if start < e and s < end:
                raise Conflict(f"{title!r} overlaps {t!r}")
        self._meetings.append((start, end, title))
        self._meetings.sort()

    def cancel(self, title):
        for meeting in self._meetings:
            if meeting[2] == title:
                self._meetings.remove(meeting)
                return True
        return False

    def meetings(self):
        return list(self._meetings)


def free_slots(room, day_start=0, day_end=1440, minimum=1):
    slots, cursor = [], day_start
    for start, end, _ in room.meetings():
        if end <= day_start or start >= day_end:
            continue
        if start - cursor >= minimum:
            slots.append((cursor, start))
        cursor = max(cursor, end)
    if day_end - cursor >= minimum:
        slots.append((cursor, day_end))
    return slots
