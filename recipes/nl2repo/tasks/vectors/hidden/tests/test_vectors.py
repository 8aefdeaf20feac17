import math

import pytest

from vectors import Vec2


def test_arithmetic():
    assert Vec2(1, 2) + Vec2(3, 4) == Vec2(4, 6)
    assert Vec2(1, 2) - Vec2(3, 4) == Vec2(-2, -2)
    assert 2 * Vec2(1, 2) == Vec2(2, 4) == Vec2(1, 2) * 2
    assert Vec2(2, 4) / 2 == Vec2(1, 2)
    assert -Vec2(1, -1) == Vec2(-1, 1)


def test_repr_and_hash():
    assert repr(Vec2(1, 2)) == "Vec2(1, 2)"
    assert len({Vec2(1, 2), Vec2(1, 2)}) == 1


def test_products():
    assert Vec2(1, 2).dot(Vec2(3, 4)) == 11
    assert Vec2(1, 0).cross(Vec2(0, 1)) == 1


def test_norm_and_normalized():
    assert Vec2(3, 4).norm() == 5
    assert Vec2(0, 2).normalized() == Vec2(0, 1)
    with pytest.raises(ValueError):
        Vec2(0, 0).normalized()


def test_angle():
    assert Vec2(1, 0).angle_to(Vec2(0, 3)) == pytest.approx(math.pi / 2)


def test_immutable():
    v = Vec2(1, 2)
    with pytest.raises(AttributeError):
        v.x = 5
