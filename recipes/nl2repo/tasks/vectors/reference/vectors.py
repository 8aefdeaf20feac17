"""An immutable 2D vector."""

import math


class Vec2:
    __slots__ = ("_x", "_y")

    def __init__(self, x, y):
        object.__setattr__(self, "_x", x)
        object.__setattr__(self, "_y", y)

    x = property(lambda self: self._x)
    y = property(lambda self: self._y)

    def __setattr__(self, name, value):
        raise AttributeError("Vec2 is immutable")

    def __eq__(self, other):
        return isinstance(other, Vec2) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self):
        return hash((self.x, self.y))

    def __repr__(self):
        return f"Vec2({self.x}, {self.y})"

    def __add__(self, other):
        return Vec2(self.x + other.x, self.y + other.y)

    def __sub__(self, other):
        return Vec2(self.x - other.x, self.y - other.y)

    def __mul__(self, k):
        return Vec2(self.x * k, self.y * k)

    __rmul__ = __mul__

    def __truediv__(self, k):
        return Vec2(self.x / k, self.y / k)

    def __neg__(self):
        return Vec2(-self.x, -self.y)

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    def cross(self, other):
        return self.x * other.y - self.y * other.x

    def norm(self):
        return math.hypot(self.x, self.y)

    def normalized(self):
        length = self.norm()
        if length == 0:
            raise ValueError("cannot normalize the zero vector")
        return self / length

    def angle_to(self, other):
        cos = self.dot(other) / (self.norm() * other.norm())
        return math.acos(max(-1.0, min(1.0, cos)))
